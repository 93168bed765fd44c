"""Where the installed plugin library is: the `pluggable.plugins` entry point calls
`library_path()` (an entry point may also name a path string directly)."""
import os


def library_path() -> str:
    site_packages = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(site_packages, "tensorflow-plugins", "libmy_device_plugin.so")
