"""Small record classes for what every start-up defines (settings rows, the algorithm registry,
the model): ``__slots__`` and an explicit ``__init__`` per class, with the equality, hash, repr
and ``replace`` a ``dataclass`` would generate.

A ``@dataclass`` builds its methods from generated source at import (``exec``), several
million instructions per class of every start-up; these are written once here.
A subclass lists its field names in ``_fields``, in ``__init__``'s order.
"""


class Record:
    """A mutable record: equal when the class and every field are equal; not hashable."""
    __slots__ = ()
    _fields = ()

    def _values(self) -> tuple:
        return tuple([getattr(self, name) for name in self._fields])

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    __hash__ = None

    def replace(self, **changes):
        """A copy with ``changes`` (field name -> value), made through ``__init__`` like
        ``dataclasses.replace``."""
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{name: changes[name] if name in changes else getattr(self, name)
                             for name in self._fields})


class Frozen(Record):
    """An immutable record: fields are set once by ``__init__`` (through ``object.__setattr__``);
    hashable from its fields."""
    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r} of {type(self).__qualname__}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r} of {type(self).__qualname__}")

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self):
        return (_rebuild, (type(self), {name: getattr(self, name) for name in self._fields}))


def _rebuild(cls, values: dict):
    return cls(**values)
