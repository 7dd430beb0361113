from enum import StrEnum


class RetrySpecBackoffType2Type1(StrEnum):
    EXPONENTIAL = "exponential"
    FIXED = "fixed"

    def __str__(self) -> str:
        return str(self.value)
