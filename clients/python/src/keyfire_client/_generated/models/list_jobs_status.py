from enum import StrEnum


class ListJobsStatus(StrEnum):
    ACTIVE = "active"
    FINISHED = "finished"
    PAUSED = "paused"
    WAITING = "waiting"

    def __str__(self) -> str:
        return str(self.value)
