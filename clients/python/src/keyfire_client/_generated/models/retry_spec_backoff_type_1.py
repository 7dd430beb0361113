from enum import StrEnum


class RetrySpecBackoffType1(StrEnum):
    EXPONENTIAL = "exponential"
    FIXED = "fixed"

    def __str__(self) -> str:
        return str(self.value)
