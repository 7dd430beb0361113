from enum import StrEnum


class TaskWhyCode(StrEnum):
    DEAD = "dead"
    DELAYED = "delayed"
    DELETED = "deleted"
    DONE = "done"
    NO_NODE = "no_node"
    OVERDUE = "overdue"
    PAUSED = "paused"
    READY = "ready"
    RESERVED = "reserved"

    def __str__(self) -> str:
        return str(self.value)
