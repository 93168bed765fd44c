"""``python -m pluggable._probe_child PLUGIN REPORT``: the child process of `pluggable.probe`."""
import sys

from pluggable.probe import child_main

if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
