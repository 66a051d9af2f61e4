"""Typed stubs of the native module; the documented API is in ``neardup`` and its modules."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

CONTRACT_VERSION: str
__version__: str
DECONTAM_N: int
DECONTAM_PROTECT_SHORT: int

def defaults() -> str: ...

class NeardupError(Exception):
    """An error of neardup's, with the message its command line prints."""

def signatures(
    texts: Any,
    *,
    k: int,
    num_perm: int,
    seed: int,
    shingle: str,
    normalize: str,
    engine: str,
    threads: int,
    column: str,
    gpu_kernels: str,
    gpu_int64: bool,
) -> Tuple[bytearray, int, str]: ...
def release_engines() -> int: ...
def dedup(
    ids: Any,
    texts: Any,
    options: Dict[str, Any],
    *,
    keep_values: Optional[Sequence[Optional[float]]],
    groups: Optional[Sequence[Optional[str]]],
    engine: str,
    threads: int,
    gpu_kernels: str,
    gpu_int64: bool,
    progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None,
) -> Tuple[bytearray, bytearray, bytearray, str, str]: ...
class Protected:
    def __init__(
        self, *, n: int, protect_short: int, join_fields: bool, task_field: Optional[str]
    ) -> None: ...
    def add_file(self, path: str) -> None: ...
    def add_texts(self, name: str, texts: Any) -> None: ...
    def check(
        self, texts: Any, *, column: str, min_score: Optional[float], tags: bool
    ) -> Tuple[bytearray, Optional[List[Optional[str]]]]: ...
    def summary(self) -> str: ...

def stage_init(
    work_dir: str,
    inputs: List[str],
    partitions: int,
    options: Dict[str, Any],
    against: List[str],
    out: Optional[str] = None,
    out_clusters: Optional[str] = None,
    out_pairs: Optional[str] = None,
    out_report: Optional[str] = None,
    glob: Optional[str] = None,
) -> Tuple[int, int]: ...
def stage_shape(work_dir: str) -> Tuple[int, int]: ...
def stage_next(
    work_dir: str, task_memory: int, confirm_tasks: int, steps: bool = True
) -> List[str]: ...
def stage_task(task: str) -> Tuple[str, str, Optional[int], Optional[int], bool]: ...
def stage_run(
    work_dir: str,
    task: str,
    engine: str,
    threads: int,
    gpu_kernels: str,
    gpu_int64: bool,
    clusters: Optional[str] = None,
    pairs: Optional[str] = None,
    progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None,
) -> str: ...
def stage_sign(
    work_dir: str,
    shard: int,
    engine: str,
    threads: int,
    gpu_kernels: str,
    gpu_int64: bool,
    progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None,
) -> Optional[str]: ...
def stage_rank(
    work_dir: str, sort_memory: int, progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None
) -> Optional[str]: ...
def stage_rank_step(
    work_dir: str, step: str, index: Optional[int] = None, task_memory: int = 1024
) -> str: ...
def stage_cluster_step(
    work_dir: str,
    step: str,
    index: Optional[int] = None,
    round: Optional[int] = None,
    task_memory: int = 1024,
    clusters: Optional[str] = None,
    pairs: Optional[str] = None,
) -> str: ...
def stage_bands(work_dir: str, shard: int) -> bool: ...
def stage_confirm(
    work_dir: str, partition: int, progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None
) -> Optional[str]: ...
def stage_confirm_group(
    work_dir: str, partitions: List[int], progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None
) -> List[Optional[str]]: ...
def stage_greedy_round(
    work_dir: str, round: int, partition: int, progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None
) -> Optional[str]: ...
def stage_greedy_settle(
    work_dir: str, round: int, progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None
) -> str: ...
def stage_cluster(
    work_dir: str,
    clusters: Optional[str] = None,
    pairs: Optional[str] = None,
    progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None,
) -> str: ...
def stage_apply(
    work_dir: str, shard: int, output: str, progress: Optional[Callable[[str, int, Optional[int], int], Any]] = None
) -> str: ...
def stage_report(
    work_dir: str, reports: List[str], output: str, seconds: Optional[float] = None
) -> str: ...
def expand_inputs(inputs: List[str], glob: Optional[str] = None) -> List[str]: ...
def stage_removed(work_dir: str, path: str) -> int: ...
def stage_verdicts(
    work_dir: str, shard: int
) -> Tuple[List[str], List[Optional[str]], bytes, List[str], List[Optional[str]], bytes]: ...
