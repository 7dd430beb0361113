from enum import StrEnum


class RetrySpecBackoffType3Type1(StrEnum):
    EXPONENTIAL = "exponential"
    FIXED = "fixed"

    def __str__(self) -> str:
        return str(self.value)
