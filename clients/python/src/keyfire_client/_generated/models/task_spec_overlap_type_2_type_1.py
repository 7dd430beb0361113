from enum import StrEnum


class TaskSpecOverlapType2Type1(StrEnum):
    ALLOW = "allow"
    FORBID = "forbid"
    REPLACE = "replace"

    def __str__(self) -> str:
        return str(self.value)
