from enum import StrEnum


class WhyCode(StrEnum):
    AFTER_TASK = "after_task"
    EXCLUDED = "excluded"
    FINISHED = "finished"
    FLOW_LIMITED = "flow_limited"
    MAX_RUNS_REACHED = "max_runs_reached"
    NO_HANDLER = "no_handler"
    NO_NODE = "no_node"
    OUTSIDE_WINDOW = "outside_window"
    OVERDUE = "overdue"
    PAUSED = "paused"
    PAUSED_AFTER_FAILURES = "paused_after_failures"
    REDIS_FULL = "redis_full"
    RETRYING = "retrying"
    RUNNING = "running"
    WAITING = "waiting"

    def __str__(self) -> str:
        return str(self.value)
