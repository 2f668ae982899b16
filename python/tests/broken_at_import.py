"""A recipe file that fails while it is imported (the bridge's loader test)."""
import torchconform

raise RuntimeError("broken at import")  # IMPORT_LINE: the test finds this line's number


class NeverRun(torchconform.Run):
    pass
