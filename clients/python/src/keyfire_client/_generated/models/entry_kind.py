from enum import StrEnum


class EntryKind(StrEnum):
    RUN = "run"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return str(self.value)
