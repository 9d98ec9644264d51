"""Windows for the window operator: windows, assigners, triggers, the merging window set and
window functions, shaped like PyFlink's (``flowray.datastream.window`` re-exports the public
part). Pure Python: no state backend, no timers of its own; the operator drives them."""

from flowray.operators.windowing.assigners import *  # noqa: F403
from flowray.operators.windowing.assigners import __all__ as _assigners_all
from flowray.operators.windowing.functions import *  # noqa: F403
from flowray.operators.windowing.functions import __all__ as _functions_all
from flowray.operators.windowing.merging_window_set import MergingWindowSet
from flowray.operators.windowing.triggers import *  # noqa: F403
from flowray.operators.windowing.triggers import __all__ as _triggers_all
from flowray.operators.windowing.windows import *  # noqa: F403
from flowray.operators.windowing.windows import __all__ as _windows_all

__all__ = [*_windows_all, *_assigners_all, *_triggers_all, "MergingWindowSet", *_functions_all]
