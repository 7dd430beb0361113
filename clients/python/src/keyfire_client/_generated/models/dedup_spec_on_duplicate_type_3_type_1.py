from enum import StrEnum


class DedupSpecOnDuplicateType3Type1(StrEnum):
    EXTEND = "extend"
    KEEP = "keep"
    REPLACE = "replace"
    REPLACE_EXTEND = "replace_extend"

    def __str__(self) -> str:
        return str(self.value)
