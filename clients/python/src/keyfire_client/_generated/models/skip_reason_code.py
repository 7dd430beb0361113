from enum import StrEnum


class SkipReasonCode(StrEnum):
    CATCH_UP_LIMIT = "catch_up_limit"
    DELETED = "deleted"
    EXCLUDED = "excluded"
    MAX_RUNS = "max_runs"
    MERGED = "merged"
    MISFIRE = "misfire"
    OTHER = "other"
    OVERLAP = "overlap"
    PAUSED = "paused"
    UPDATED = "updated"

    def __str__(self) -> str:
        return str(self.value)
