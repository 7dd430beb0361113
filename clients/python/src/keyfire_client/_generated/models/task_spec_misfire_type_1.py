from enum import StrEnum


class TaskSpecMisfireType1(StrEnum):
    CATCH_UP = "catch_up"
    FIRE_ONCE = "fire_once"
    SKIP = "skip"

    def __str__(self) -> str:
        return str(self.value)
