"""A plugin's dependency tree, resolved the way the dynamic loader resolves it, without loading
anything: every library it needs (DT_NEEDED), looked up through DT_RPATH, LD_LIBRARY_PATH,
DT_RUNPATH, the loader's cache (``ldconfig -p``) and the default folders, with ``$ORIGIN``
expanded. It tells, before a plugin runs, every library that is missing (``dlopen`` names only
the first), the C API functions that neither the host's runtime nor the tree provides, and
whether the plugin links TensorFlow's own libraries, which would bring a second
implementation of the C API into the process.
"""
from __future__ import annotations

import os
import sys

from ..base.record import record
from . import elf

TYPE_CHECKING = False  # typing's constant, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Dict, Iterable, List, Mapping, Optional, Tuple

#: Prefixes of the C API functions a plugin may expect its host to provide.
API_PREFIXES = ("TF_", "TSL_", "SE_", "TP_", "TFE_")
#: TensorFlow's own libraries: each carries TensorFlow's implementation of the C API.
TENSORFLOW_LIBRARIES = ("_pywrap_tensorflow_internal.so", "libtensorflow_framework.so",
                        "libtensorflow_cc.so", "libtensorflow.so")
# The C API functions plugins built against TensorFlow import that the host runtime does
# not provide, each family with the reason (include/ABI.md, "Functions of TensorFlow's
# client API"): (does a name belong to it, why it is not provided).
UNPROVIDED = (
    (lambda name: name.startswith("TFE_"),
     "TensorFlow's eager C API: a kernel that runs TensorFlow ops itself through a "
     "TFE_Context needs TensorFlow's eager runtime, and pluggable's ops run in Python, not "
     "from C"),
    (lambda name: "PjRt" in name,
     "the NextPluggableDevice API: pluggable drives devices through the StreamExecutor C API "
     "and has no PJRT client or buffers"),
    (lambda name: name in ("TF_NewGraph", "TF_DeleteGraph", "TF_NewSession",
                           "TF_DeleteSession") or name.startswith((
                               "TF_Graph", "TF_Session", "TF_NewOperation", "TF_Operation",
                               "TF_FinishOperation", "TF_Function", "TF_ImportGraphDef")),
     "TensorFlow's graph and session API: pluggable builds no graphs and runs no sessions"),
)
_OTHER = ("not among the TensorFlow C API functions pluggable provides (include/ABI.md lists "
          "them); the plugin must run inside TensorFlow")


def describe_missing_symbols(names: Iterable[str]) -> str:
    """Every name of ``names`` (C API functions the host does not provide), grouped by why:
    ``TFE_NewOp, TFE_Execute: TensorFlow's eager C API: ...; TF_Foo: not among ...``."""
    groups: Dict[str, List[str]] = {}
    for name in sorted(names):
        reason = next((why for belongs, why in UNPROVIDED if belongs(name)), _OTHER)
        groups.setdefault(reason, []).append(name)
    return "; ".join(f"{', '.join(found)} ({reason})" for reason, found in groups.items())


_TENSORFLOW_PACKAGES = {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                        "tensorflow-macos", "tf-nightly", "tf-nightly-cpu"}


@record
class Library:
    """One library of the tree: ``name`` as needed (or the plugin's own path), the file it
    resolves to (None when missing), and the library that needs it (None for the plugin)."""

    name: str
    path: Optional[str] = None
    needed_by: Optional[str] = None


def is_tensorflow(name: str) -> bool:
    base = os.path.basename(name)
    return any(base == lib or base.startswith(lib + ".") for lib in TENSORFLOW_LIBRARIES)


_cache: Optional[Dict[str, str]] = None


def _loader_cache() -> Dict[str, str]:
    """The loader's cache, soname -> path, for this machine's kind of library (read once)."""
    global _cache
    if _cache is None:
        import subprocess  # here: only a library missing from the usual folders asks

        _cache = {}
        for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
            try:
                out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True,
                                     timeout=10).stdout
                break
            except (OSError, subprocess.SubprocessError):
                out = ""
        for line in out.splitlines()[1:]:
            name, _, path = line.strip().partition(" => ")
            soname = name.split(" (", 1)[0]
            if path and soname not in _cache and elf.check_compatible(path) is None:
                _cache[soname] = path
    return _cache


def system_folders() -> List[str]:
    # The interpreter knows its multiarch triplet without loading sysconfig's data module.
    multiarch = getattr(sys.implementation, "_multiarch", None)
    if multiarch is None:
        import sysconfig

        multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    folders = [f"/lib/{multiarch}", f"/usr/lib/{multiarch}"] if multiarch else []
    return [f + "/" for f in folders] + ["/lib64/", "/usr/lib64/", "/lib/", "/usr/lib/"]


def _expand(folder: str, origin: str) -> str:
    return folder.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)


class Tree:
    """The resolved tree of ``root``: `libraries` in the order the loader meets them (the
    plugin first), `missing` the needed names found nowhere."""

    def __init__(self, root: str, environ: Optional[Mapping[str, str]] = None):
        environ = os.environ if environ is None else environ
        self.root = os.path.realpath(root)
        self.library_path = [p for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p]
        self.libraries: List[Library] = [Library(self.root, self.root, None)]
        self._info: Dict[str, elf.DynamicInfo] = {}
        by_name: Dict[str, Optional[str]] = {}
        # (path, info, RPATH folders of the chain of libraries that loaded it)
        queue: List[Tuple[str, List[str]]] = [(self.root, [])]
        seen = {self.root}
        while queue:
            path, inherited = queue.pop(0)
            info = self._dynamic(path)
            if info is None:
                continue
            origin = os.path.dirname(path)
            rpath = [_expand(p, origin) for p in info.rpath]
            chain = (rpath + inherited) if not info.runpath else []
            runpath = [_expand(p, origin) for p in info.runpath]
            for name in info.needed:
                if name in by_name:  # the loader reuses a library it has loaded by name
                    continue
                found = self._find(name, chain, runpath)
                by_name[name] = found
                self.libraries.append(Library(name, found, path))
                if found is not None and found not in seen:
                    seen.add(found)
                    queue.append((found, rpath + inherited))

    def _dynamic(self, path: str) -> Optional[elf.DynamicInfo]:
        if path not in self._info:
            try:
                self._info[path] = elf.dynamic_info(path)
            except (OSError, ValueError):
                self._info[path] = None
        return self._info[path]

    def _find(self, name: str, rpath: List[str], runpath: List[str]) -> Optional[str]:
        if "/" in name:
            return os.path.realpath(name) if os.path.isfile(name) else None
        # The loader reads its cache before the default folders; the folders come first here
        # so that a start-up never runs ldconfig for a plugin whose libraries are there (what
        # the cache lists lies in those folders or in the ones ld.so.conf adds).
        for folder in (*rpath, *self.library_path, *runpath, *system_folders()):
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate) and elf.check_compatible(candidate) is None:
                return os.path.realpath(candidate)
        cached = _loader_cache().get(name)
        if cached is not None and os.path.isfile(cached):
            return os.path.realpath(cached)
        return None

    @property
    def missing(self) -> List[Library]:
        return [lib for lib in self.libraries if lib.path is None]

    @property
    def tensorflow(self) -> List[Library]:
        """The TensorFlow libraries the tree links (found or not)."""
        return [lib for lib in self.libraries[1:] if is_tensorflow(lib.name)]

    def missing_symbols(self, provided: Iterable[str]) -> Dict[str, List[str]]:
        """The C API functions (`API_PREFIXES`) that libraries of the tree use and neither
        ``provided`` (the host runtime's exports) nor any library of the tree defines:
        {function: [the libraries that use it]}."""
        defined = set(provided)
        uses: Dict[str, List[str]] = {}
        infos = []
        for lib in self.libraries:
            if lib.path is None:
                continue
            try:
                info = elf.dynamic_info(lib.path, API_PREFIXES)
            except (OSError, ValueError):
                continue
            defined |= info.defined
            infos.append((lib.path, info))
        for path, info in infos:
            for name in info.undefined - defined:
                uses.setdefault(name, []).append(os.path.basename(path))
        return dict(sorted(uses.items()))

    def identity(self) -> List[list]:
        """What decides the loader's work for this tree: each library as resolved (name,
        path, inode, size, mtime) and each missing name, for the probe's cached verdicts."""
        out = []
        for lib in self.libraries[1:]:
            if lib.path is None:
                out.append([lib.name, None])
                continue
            try:
                info = os.stat(lib.path)
            except OSError:
                out.append([lib.name, lib.path, None])
                continue
            out.append([lib.name, lib.path, info.st_ino, info.st_size, info.st_mtime_ns])
        return out

    def describe_missing(self, limit: int = 20) -> str:
        """``libimf.so (needed by libitex_gpu.so), ...``: every missing library, once."""
        parts = [f"{lib.name} (needed by {os.path.basename(lib.needed_by)})"
                 for lib in self.missing[:limit]]
        more = len(self.missing) - limit
        return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def tensorflow_build(tree: Tree) -> str:
    """What can be told of the TensorFlow a plugin that links TensorFlow's libraries was built
    for: the version its owning package asks for (the wheel's METADATA) and the major version
    in the library names."""
    names = sorted({lib.name for lib in tree.tensorflow})
    majors = sorted({lib.name.rsplit(".so.", 1)[1].split(".")[0] for lib in tree.tensorflow
                     if ".so." in lib.name})
    told = f"it links {', '.join(names)}"
    if majors:
        told += f" (TensorFlow {'/'.join(majors)}.x)"
    wheel = owning_distribution(tree.root)
    if wheel is not None:
        import re  # here: only a refused plugin gets this far

        name, requirements = wheel
        wanted = [r for r in requirements if "extra ==" not in r and
                  re.match(r"[A-Za-z0-9_.-]+", r).group().lower().replace("_", "-")
                  in _TENSORFLOW_PACKAGES]
        told += f"; it comes from the package {name}"
        if wanted:
            told += f", which requires {', '.join(wanted)}"
    return told


def owning_distribution(path: str) -> Optional[Tuple[str, List[str]]]:
    """(``name==version``, its Requires-Dist lines) of the installed package whose RECORD
    lists ``path``, looked for in the site folder that holds it; None when none does."""
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    while folder and folder != os.path.dirname(folder):
        entries = [e for e in _listdir(folder) if e.endswith(".dist-info")]
        for entry in entries:
            info = os.path.join(folder, entry)
            try:
                with open(os.path.join(info, "RECORD"), encoding="utf-8") as f:
                    owned = {os.path.realpath(os.path.join(folder, line.split(",", 1)[0]))
                             for line in f}
            except OSError:
                continue
            if path in owned:
                return _metadata(info)
        if entries:  # a site folder: the package would be recorded here
            return None
        folder = os.path.dirname(folder)
    return None


def _listdir(folder: str) -> List[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _metadata(info: str) -> Tuple[str, List[str]]:
    name = version = "?"
    requires = []
    try:
        with open(os.path.join(info, "METADATA"), encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key == "Name":  # as pip spells it: lower case, runs of -_. as one -
                    name = "-".join(p for p in value.strip().lower()
                                    .replace("_", "-").replace(".", "-").split("-") if p)
                elif key == "Version":
                    version = value.strip()
                elif key == "Requires-Dist":
                    requires.append(value.strip())
    except OSError:
        pass
    return f"{name}=={version}", requires


_trees: Dict[Tuple, Tree] = {}


def tree_of(path: str) -> Tree:
    """`Tree` of ``path``, once per process for a given file and loader environment."""
    real = os.path.realpath(path)
    info = os.stat(real)
    key = (real, info.st_ino, info.st_mtime_ns, os.environ.get("LD_LIBRARY_PATH", ""))
    tree = _trees.get(key)
    if tree is None:
        tree = _trees[key] = Tree(real)
    return tree


def loader_environment() -> Dict[str, str]:
    """The environment variables that change what the dynamic loader does."""
    return {name: os.environ.get(name, "") for name in ("LD_LIBRARY_PATH", "LD_PRELOAD")}

