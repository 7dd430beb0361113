"""Contains all the data models used in inputs/outputs"""

from .add_task import AddTask
from .added import Added
from .added_batch import AddedBatch
from .backfill_request import BackfillRequest
from .backfill_view import BackfillView
from .batch_status import BatchStatus
from .bulk_changed import BulkChanged
from .calendar_list import CalendarList
from .calendar_spec import CalendarSpec
from .cancel_view import CancelView
from .date_range import DateRange
from .dead_count import DeadCount
from .dead_letter_view import DeadLetterView
from .dead_list import DeadList
from .dead_summary import DeadSummary
from .dedup_spec import DedupSpec
from .dedup_spec_on_duplicate_type_1 import DedupSpecOnDuplicateType1
from .dedup_spec_on_duplicate_type_2_type_1 import DedupSpecOnDuplicateType2Type1
from .dedup_spec_on_duplicate_type_3_type_1 import DedupSpecOnDuplicateType3Type1
from .entry_kind import EntryKind
from .error_body import ErrorBody
from .error_detail import ErrorDetail
from .finish_body import FinishBody
from .finish_item import FinishItem
from .finish_many import FinishMany
from .finish_outcome import FinishOutcome
from .finished_many import FinishedMany
from .firing_time import FiringTime
from .health import Health
from .health_checks import HealthChecks
from .held_firing import HeldFiring
from .job_counts import JobCounts
from .job_dead import JobDead
from .job_list import JobList
from .job_selection import JobSelection
from .job_spec_type_0 import JobSpecType0
from .job_spec_type_1 import JobSpecType1
from .job_spec_type_2 import JobSpecType2
from .job_spec_type_3 import JobSpecType3
from .job_spec_without_id_type_0 import JobSpecWithoutIdType0
from .job_spec_without_id_type_1 import JobSpecWithoutIdType1
from .job_spec_without_id_type_2 import JobSpecWithoutIdType2
from .job_spec_without_id_type_3 import JobSpecWithoutIdType3
from .job_view import JobView
from .limit_list import LimitList
from .limit_spec import LimitSpec
from .limit_status import LimitStatus
from .limit_view import LimitView
from .list_jobs_status import ListJobsStatus
from .node_list import NodeList
from .node_view import NodeView
from .on_complete import OnComplete
from .overview import Overview
from .popped import Popped
from .queues import Queues
from .reserved_view import ReservedView
from .retry_spec import RetrySpec
from .retry_spec_backoff_type_1 import RetrySpecBackoffType1
from .retry_spec_backoff_type_2_type_1 import RetrySpecBackoffType2Type1
from .retry_spec_backoff_type_3_type_1 import RetrySpecBackoffType3Type1
from .run_limits_view import RunLimitsView
from .run_list import RunList
from .run_view import RunView
from .skip_reason_code import SkipReasonCode
from .skip_view import SkipView
from .stored_job_spec_type_0 import StoredJobSpecType0
from .stored_job_spec_type_1 import StoredJobSpecType1
from .stored_job_spec_type_2 import StoredJobSpecType2
from .task_batch import TaskBatch
from .task_list import TaskList
from .task_spec import TaskSpec
from .task_spec_misfire_type_1 import TaskSpecMisfireType1
from .task_spec_misfire_type_2_type_1 import TaskSpecMisfireType2Type1
from .task_spec_misfire_type_3_type_1 import TaskSpecMisfireType3Type1
from .task_spec_overlap_type_1 import TaskSpecOverlapType1
from .task_spec_overlap_type_2_type_1 import TaskSpecOverlapType2Type1
from .task_spec_overlap_type_3_type_1 import TaskSpecOverlapType3Type1
from .task_spec_params_type_0 import TaskSpecParamsType0
from .task_view import TaskView
from .task_why_cause import TaskWhyCause
from .task_why_code import TaskWhyCode
from .task_why_view import TaskWhyView
from .timeline_entry import TimelineEntry
from .topic_batch import TopicBatch
from .topic_counts import TopicCounts
from .topic_dead_letter import TopicDeadLetter
from .topic_dead_list import TopicDeadList
from .topic_list import TopicList
from .topic_paused import TopicPaused
from .topic_settings import TopicSettings
from .topic_view import TopicView
from .totals import Totals
from .touch_body import TouchBody
from .touched import Touched
from .triggered import Triggered
from .why_cause import WhyCause
from .why_code import WhyCode
from .why_limit import WhyLimit
from .why_retry import WhyRetry
from .why_running import WhyRunning
from .why_view import WhyView

__all__ = (
    "Added",
    "AddedBatch",
    "AddTask",
    "BackfillRequest",
    "BackfillView",
    "BatchStatus",
    "BulkChanged",
    "CalendarList",
    "CalendarSpec",
    "CancelView",
    "DateRange",
    "DeadCount",
    "DeadLetterView",
    "DeadList",
    "DeadSummary",
    "DedupSpec",
    "DedupSpecOnDuplicateType1",
    "DedupSpecOnDuplicateType2Type1",
    "DedupSpecOnDuplicateType3Type1",
    "EntryKind",
    "ErrorBody",
    "ErrorDetail",
    "FinishBody",
    "FinishedMany",
    "FinishItem",
    "FinishMany",
    "FinishOutcome",
    "FiringTime",
    "Health",
    "HealthChecks",
    "HeldFiring",
    "JobCounts",
    "JobDead",
    "JobList",
    "JobSelection",
    "JobSpecType0",
    "JobSpecType1",
    "JobSpecType2",
    "JobSpecType3",
    "JobSpecWithoutIdType0",
    "JobSpecWithoutIdType1",
    "JobSpecWithoutIdType2",
    "JobSpecWithoutIdType3",
    "JobView",
    "LimitList",
    "LimitSpec",
    "LimitStatus",
    "LimitView",
    "ListJobsStatus",
    "NodeList",
    "NodeView",
    "OnComplete",
    "Overview",
    "Popped",
    "Queues",
    "ReservedView",
    "RetrySpec",
    "RetrySpecBackoffType1",
    "RetrySpecBackoffType2Type1",
    "RetrySpecBackoffType3Type1",
    "RunLimitsView",
    "RunList",
    "RunView",
    "SkipReasonCode",
    "SkipView",
    "StoredJobSpecType0",
    "StoredJobSpecType1",
    "StoredJobSpecType2",
    "TaskBatch",
    "TaskList",
    "TaskSpec",
    "TaskSpecMisfireType1",
    "TaskSpecMisfireType2Type1",
    "TaskSpecMisfireType3Type1",
    "TaskSpecOverlapType1",
    "TaskSpecOverlapType2Type1",
    "TaskSpecOverlapType3Type1",
    "TaskSpecParamsType0",
    "TaskView",
    "TaskWhyCause",
    "TaskWhyCode",
    "TaskWhyView",
    "TimelineEntry",
    "TopicBatch",
    "TopicCounts",
    "TopicDeadLetter",
    "TopicDeadList",
    "TopicList",
    "TopicPaused",
    "TopicSettings",
    "TopicView",
    "Totals",
    "TouchBody",
    "Touched",
    "Triggered",
    "WhyCause",
    "WhyCode",
    "WhyLimit",
    "WhyRetry",
    "WhyRunning",
    "WhyView",
)
