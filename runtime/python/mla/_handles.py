"""Ownership of C handles: each released once, children before parents.

The C API refuses to destroy a runtime while its layers, kernels or
allocations live, and a layer while its decode graphs live. So:

- Each Python object that owns a handle keeps its parent object alive
  (an attribute), so a parent is never collected while it is used.
- The handle itself belongs to an `_Owner`, apart from the Python object,
  which counts its live children and destroys the handle once the Python
  object is gone (closed, collected, or at interpreter exit) and its
  children are released: a parent whose object goes first (as in a
  reference cycle collected in one pass) is released when its last child
  is. Finalizers hold owners, never the Python objects, so a user's cycle
  through a parent cannot keep a child alive forever.
- `close()` closes the object's live children first, then releases it,
  so closing a runtime closes everything made on it.
- At interpreter exit, `weakref.finalize` releases what is left, newest
  first, and nothing runs after that, when the library may be gone.

Calling a closed object raises InvalidArgumentError, never a crash.
"""

import threading
import weakref
from typing import Any, Callable, Optional, TypeVar

from .errors import InvalidArgumentError

_Self = TypeVar("_Self", bound="Handle")

# Finalizers may run on any thread, and inside another owner's bookkeeping
# (a collection started by an allocation there): hence re-entrant.
_lock = threading.RLock()


class _Owner:
    """A C handle, `destroy`ed once the owning object is gone and its
    children are released. `held` (buffers the C object reads, the log
    callback) lives until then."""

    __slots__ = ("handle", "destroy", "parent", "held", "children", "orphaned", "released")

    def __init__(self, handle: int, destroy: Callable[[int], Any], parent: "Optional[_Owner]", held: tuple):
        self.handle = handle
        self.destroy = destroy
        self.parent = parent
        self.held = held
        self.children = 0
        self.orphaned = False
        self.released = False
        if parent is not None:
            with _lock:
                parent.children += 1

    def release(self) -> None:
        """The owning object is gone: destroy the handle now, or when the
        last child is released."""
        with _lock:
            if self.released:
                return
            if self.children:
                self.orphaned = True
                return
            self.released = True
        parent = self.parent
        try:
            self.destroy(self.handle)
        finally:
            self.parent = self.held = None
            if parent is not None:
                parent.child_released()

    def child_released(self) -> None:
        with _lock:
            self.children -= 1
            ready = self.orphaned and self.children == 0
        if ready:
            self.release()


class Handle:
    """Base of the objects that own a C handle; `_kind` names them in
    errors."""

    _kind = "object"
    _handle: Optional[int] = None
    _children: "Optional[weakref.WeakSet[Handle]]" = None

    def _adopt(
        self, handle: int, destroy: Callable[[int], Any], parent: "Optional[Handle]" = None, *held: Any
    ) -> None:
        """Takes ownership of `handle`, released by `destroy` after the
        children's; `held` stays alive until then."""
        owner = _Owner(handle, destroy, parent._owner if parent is not None else None, held)
        self._handle = handle
        self._owner = owner
        self._finalizer = weakref.finalize(self, owner.release)
        if parent is not None:
            if parent._children is None:
                parent._children = weakref.WeakSet()
            parent._children.add(self)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _live(self) -> int:
        """The handle; InvalidArgumentError once closed."""
        handle = self._handle
        if handle is None:
            raise InvalidArgumentError(f"the {self._kind} is closed")
        return handle

    def close(self) -> None:
        """Releases the C object now, after closing the live objects made
        from it. Closing twice is a no-op."""
        if self._children is not None:
            for child in list(self._children):
                child.close()
        self._handle = None
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
