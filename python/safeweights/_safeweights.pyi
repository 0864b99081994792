# The extension module (python/src/): its private API, typed where the package's own modules rely on a
# shape; the rest is Any. The public names it provides are typed in __init__.pyi.
from typing import Any, List, Tuple

__version__: str

def _dtype_table() -> List[Tuple[str, int, str, str]]: ...
def __getattr__(name: str) -> Any: ...
