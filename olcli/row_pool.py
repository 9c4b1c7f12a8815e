"""A model's weight table as a pool of the rows its examples touched (``RowPool``: a hashed
index's row is handed out at its first touch), its layouts (a row per class; the multiclass
default's member regions), and the operations that take a table as an array or a pool
(``all_finite``, ``snapshot``, ``restore``, ``copy_state``). The memory under it (zeroed
mappings, the scan of written pages) is olcli/state.py's.
"""

import numpy as np

from olcli.engine.pool import look_up

from olcli.state import first_arrivals, nonzero_rows, reserve, unique_sorted, zeroed_index, zeroed_state


def all_finite(state) -> bool:
    """Every number of the table (an array or a RowPool) is finite (only non-zero rows can fail)."""
    if isinstance(state, RowPool):
        return state.all_finite()
    rows = nonzero_rows(state)
    return bool(np.isfinite(state[rows]).all())


def snapshot(state) -> tuple:
    """(rows, their values): what ``restore`` needs to put the table (an array or a
    RowPool) back as it is now."""
    if isinstance(state, RowPool):
        return state.snapshot()
    rows = nonzero_rows(state)
    return rows, state[rows]


def restore(state, saved: tuple) -> None:
    """Put a ``snapshot`` back, in place: the rows non-zero now are cleared first."""
    if isinstance(state, RowPool):
        return state.restore(saved)
    state[nonzero_rows(state)] = 0.0
    rows, values = saved
    state[rows] = values


def copy_state(state):
    """An independent copy that writes only the source's non-zero rows (or a RowPool's)."""
    if isinstance(state, RowPool):
        return state.copy()
    out = zeroed_state(*state.shape, dtype=state.dtype)
    rows = nonzero_rows(state)
    out[rows] = state[rows]
    return out


# --- the row pool: a model's state, one row per touched feature ---
#
# A hashed feature index h (0 .. 2^bits, the last the constant's) has no row of its own:
# ``index[h]`` (int32, 2^bits + 1 entries allocated zeroed, so that the entries no example
# reaches cost nothing) is the pool row of its first class, 0 while h was never touched. The
# state (``state``, rows x slots float64) holds groups of K rows (K = the classes, 1 when
# not multiclass): group g is rows g*K .. g*K+K-1, class k of feature ``keys[g]`` at row
# g*K + k, so a kernel's class offset is k (Settings.block_rows = 1). Group 0 is the
# "template": the state of a row never touched (zeros, or --initial-weight's w), read by
# predictions of unseen features and copied into every free row, so that a group handed out
# holds what a never-touched row holds. Groups are handed out in the order features first
# arrive while learning (``rows_for``); saving, merging and inspect walk them through
# ``keys`` (``nonzero``), by the logical row k * (2^bits + 1) + h the model file keeps.
#
# The split S (``split``, dividing the slots; 1 but for the multiclass default mixing 2 or 3
# gd members: olcli/model.py ``pool_split``) is how the numbers lie in memory. S = 1: row by
# row, pool position p = g*K + k (class k of group g) at row p. S > 1: member regions. The
# state's memory, R rows of ``slots`` numbers (R = len(state)), read as an (S, R, w) array
# (w = slots / S; ``regions``): member m's w slots of pool position p at [m, p], i.e. row
# m*R + p of the state seen as (S*R, w) rows (``members``, what the kernels take:
# engine/mixture.py split_of). Each member's rows are a region of their own, so two
# threads learn two members without writing a cache line in common (with each member's
# rows of a feature side by side in one group, the lines at the members' borders cost the
# threads what they saved: benchmarks/results/member_threads_s45.md). The logical row of
# position p (what the model file, merging, inspect and every Python reader see:
# ``values``/``put``) is still the slots in order, member 0's w first. A split pool's
# template is all zeros. Its state grows region by region (copying), or is the whole
# reservation from the start (R = every group's rows: the regions never move, and only the
# pages written cost memory); snapshots, copies and checks take each region's used rows.

_FIRST_GROUPS = 1 << 10
_SCAN_ROWS = 1 << 16   # pool positions per block of ``nonzero``'s scan


def _checked_split(split, slots: int) -> int:
    """``split`` as an int, or ValueError where it does not divide the slots."""
    if split != int(split) or int(split) < 1 or slots % int(split):
        raise ValueError(f"a pool's split must be a whole number >= 1 dividing its {slots} slots (got {split!r})")
    return int(split)


class RowPool:
    """The touched rows of a model's table (see above). ``block_rows``: 2^bits + 1 (the
    logical rows of one class), ``group``: K (1 when not multiclass)."""

    _reserved = None   # the address range the state grows in (``state.reserve``); None: it grows by copying
    split = 1          # the layout of a group's numbers (see above)

    def __init__(self, block_rows: int, group: int, slots: int, groups: int = _FIRST_GROUPS,
                 template: np.ndarray | None = None, split: int = 1):
        self.block_rows, self.group, self.slots = int(block_rows), max(1, int(group)), int(slots)
        self.split = _checked_split(split, self.slots)
        if self.split > 1 and template is not None and np.any(template != 0):
            raise ValueError(f"a split pool's template must be all zeros (split {self.split})")
        self.index = zeroed_index(self.block_rows)
        groups = max(2, int(groups))
        self.keys = np.full(groups, -1, np.int64)
        self._reserved = reserve((self.block_rows + 1) * self.group, self.slots)
        if self._reserved is None:
            self.state = np.zeros((groups * self.group, self.slots))
        else:   # split: the regions at their places in the whole reservation (see above)
            self.state = self._reserved if self.split > 1 else self._reserved[:groups * self.group]
        if template is not None and np.any(template != 0):
            self.state[:] = np.tile(template, (groups, 1))
        self.used = 1   # group 0: the template

    # -- shape --
    @property
    def rows(self) -> int:
        """The logical rows: K x (2^bits + 1) (what the model file calls the table's rows)."""
        return self.group * self.block_rows

    @property
    def capacity(self) -> int:
        return len(self.keys)

    @property
    def template(self) -> np.ndarray:
        """Group 0's K logical rows (a view with split 1)."""
        if self.split > 1:
            return self.values(np.arange(self.group))
        return self.state[:self.group]

    def _template_zero(self) -> bool:
        return not np.any(self.template != 0)

    def regions(self) -> np.ndarray:
        """A split pool's state as (S, R, w): member m's slots of pool position p at [m, p]
        (a view; see above)."""
        return self.state.reshape(self.split, len(self.state), self.slots // self.split)

    def _used_regions(self) -> np.ndarray:
        """Each region's rows handed out so far (groups 0 .. used - 1): (S, used K, w), a view."""
        return self.regions()[:, :self.used * self.group]

    def grow(self, groups: int) -> None:
        """Room for at least ``groups`` groups (the capacity doubles at least); the new
        rows hold the template."""
        if groups <= self.capacity:
            return
        old = self.capacity * self.group
        reserved = self._reserved
        if self.split > 1:   # the regions: in place in the reservation, else copied region by region
            groups = max(groups, 2 * self.capacity)
            if reserved is not None and self.state is reserved:   # it holds every group there can be
                groups = min(groups, len(reserved) // self.group)
                state = self.state
            else:
                state = np.zeros((groups * self.group, self.slots), self.state.dtype)
                wide = state.reshape(self.split, len(state), self.slots // self.split)
                wide[:, :self.used * self.group] = self._used_regions()
        elif (reserved is not None and groups * self.group <= len(reserved) and len(self.state) == old
                and self.state.__array_interface__["data"][0] == reserved.__array_interface__["data"][0]):
            # the rows so far are the reservation's first: longer, not copied
            groups = min(max(groups, 2 * self.capacity), len(reserved) // self.group)
            state = reserved[:groups * self.group]
        else:
            groups = max(groups, 2 * self.capacity)
            state = np.zeros((groups * self.group, self.slots), self.state.dtype)
            state[:old] = self.state
        if not self._template_zero():   # (never for a split pool)
            state[old:] = np.tile(self.template, (groups - self.capacity, 1))
        keys = np.full(groups, -1, np.int64)
        keys[:self.capacity] = self.keys
        self.state, self.keys = state, keys

    # -- kernels' rows --
    def rows_for(self, index: np.ndarray, learn: bool) -> np.ndarray:
        """The pool rows (int32, class 0's) of a batch's hashed indices. Learning hands out a
        group to each index not met before, in the order of first arrival; predicting maps
        those to the template (group 0), and nothing writes there."""
        if learn and len(index):
            if index.dtype != np.int32:   # look_up's type; checked first, as a cast could wrap
                if index.min() < 0 or index.max() >= len(self.index):
                    raise IndexError(f"a hashed index is outside the table of {len(self.index)} rows")
                index = index.astype(np.int32)
            index = np.ascontiguousarray(index)
            current = np.empty(len(index), np.int32)
            missing = np.empty(len(index), np.int64)
            count = look_up(self.index, index, current, missing)
            if count < 0:
                raise IndexError(f"hashed index {int(index[-1 - count])} is outside the table "
                                 f"of {len(self.index)} rows")
            missing = missing[:count]   # the unseen ones (few after the first chunk)
            new = index[missing]
            if new.size:
                arrivals = first_arrivals(new)
                start = self.used
                self.grow(start + len(arrivals))
                groups = np.arange(start, start + len(arrivals), dtype=np.int64)
                self.index[arrivals] = (groups * self.group).astype(np.int32)
                self.keys[groups] = arrivals
                self.used = start + len(arrivals)
                current[missing] = self.index[new]  # the batch's other rows are as looked up
            return current
        return self.index[index]

    def pool_rows(self, rows) -> np.ndarray:
        """Pool rows (int64) of logical rows k * block_rows + h (a never-touched h: the
        template's row k)."""
        rows = np.asarray(rows, np.int64)
        k, h = np.divmod(rows, self.block_rows)
        return self.index[h].astype(np.int64) + k

    def members(self) -> np.ndarray:
        """The state as rows of one member's slots (split S > 1): (S R, slots / S), a view
        (never a copy: writing it writes the state); member m's slots of pool position p at
        row m R + p (R = len(state)). What the kernels take (Learner.table)."""
        if not self.state.flags.c_contiguous:   # reshape would copy: writes would be lost
            raise ValueError("a split pool's state must be one contiguous array")
        return self.state.reshape(-1, self.slots // self.split)

    def _member_rows(self, at) -> np.ndarray:
        """(len(at), S) rows of ``members`` holding the logical rows at pool positions ``at``."""
        at = np.asarray(at, np.int64).reshape(-1)
        return at[:, None] + len(self.state) * np.arange(self.split, dtype=np.int64)

    def values(self, at) -> np.ndarray:
        """The logical rows (a copy, (len(at), slots) float64) at pool positions ``at``
        (g*K + k: class k of group g), whatever the split."""
        if self.split == 1:
            return self.state[at]
        at = np.asarray(at, np.int64).reshape(-1)
        return self.members()[self._member_rows(at)].reshape(len(at), self.slots)

    def put(self, at, values) -> None:
        """Write logical rows ``values`` ((len(at), slots), or what broadcasts to it) at pool
        positions ``at``."""
        if self.split == 1:
            self.state[at] = values
            return
        at = np.asarray(at, np.int64).reshape(-1)
        values = np.broadcast_to(np.asarray(values, self.state.dtype), (len(at), self.slots))
        self.members()[self._member_rows(at)] = values.reshape(len(at), self.split, self.slots // self.split)

    def gather(self, rows) -> np.ndarray:
        """The state of logical rows (a copy)."""
        return self.values(self.pool_rows(rows))

    def nonzero(self) -> tuple:
        """(logical rows, increasing; their pool rows) of the rows holding a non-zero value:
        every logical row when the template is not all zeros (a never-touched row then holds
        it), else the touched ones."""
        if not self._template_zero():
            rows = np.arange(self.rows, dtype=np.int64)
            return rows, self.pool_rows(rows)
        groups = np.arange(1, self.used, dtype=np.int64)
        k = np.arange(self.group, dtype=np.int64)
        logical = (k[None, :] * self.block_rows + self.keys[groups][:, None]).reshape(-1)
        pool = np.arange(self.group, self.used * self.group, dtype=np.int64)   # group g's class k at g K + k
        live = np.zeros(len(pool), bool)
        if self.split == 1:
            touched = self.state[self.group:self.used * self.group]   # those rows, in that order: a view
            for start in range(0, len(pool), _SCAN_ROWS):
                live[start:start + _SCAN_ROWS] = np.any(touched[start:start + _SCAN_ROWS] != 0, axis=1)
        else:   # a position is live when any member's slot of it is (each member's region in turn)
            touched = self.regions()[:, self.group:self.used * self.group]
            for start in range(0, len(pool), _SCAN_ROWS):
                seen = np.any(touched[0, start:start + _SCAN_ROWS] != 0, axis=1)
                for m in range(1, self.split):
                    seen |= np.any(touched[m, start:start + _SCAN_ROWS] != 0, axis=1)
                live[start:start + _SCAN_ROWS] = seen
        logical, pool = logical[live], pool[live]
        order = np.argsort(logical, kind="stable")
        return logical[order], pool[order]

    def dense(self) -> np.ndarray:
        """The whole logical table (K x (2^bits + 1) rows), read-only: for inspecting a
        model in tests and at the prompt, never on a run's path."""
        out = zeroed_state(self.rows, self.slots)
        if not self._template_zero():
            for k in range(self.group):
                out[k * self.block_rows:(k + 1) * self.block_rows] = self.template[k]
        logical, pool = self.nonzero()
        out[logical] = self.values(pool)
        out.flags.writeable = False
        return out

    # -- whole-pool operations --
    @classmethod
    def from_rows(cls, block_rows: int, group: int, slots: int, rows, values, split: int = 1) -> "RowPool":
        """A pool holding ``values`` at logical ``rows`` (increasing); every other row zero."""
        features = unique_sorted(np.asarray(rows, np.int64) % block_rows)
        pool = cls(block_rows, group, slots, groups=len(features) + 1, split=split)
        pool.fill(rows, values, features)
        return pool

    @classmethod
    def on(cls, block_rows: int, group: int, slots: int, index, keys, state, split: int = 1) -> "RowPool":
        """A pool on given arrays (olcli/shared_table.py's mapping), all its groups in use;
        ``split``: the layout the state holds."""
        pool = cls.__new__(cls)
        pool.block_rows, pool.group, pool.slots = int(block_rows), max(1, int(group)), int(slots)
        pool.split = _checked_split(split, pool.slots)
        pool.index, pool.keys, pool.state, pool.used = index, keys, state, len(keys)
        return pool

    def fill(self, rows, values, features) -> None:
        """Hand out groups 1.. to ``features`` (the distinct hashed indices of ``rows``,
        increasing) and write ``values`` at logical ``rows``."""
        rows = np.asarray(rows, np.int64)
        k, h = np.divmod(rows, self.block_rows)
        groups = np.arange(1, len(features) + 1, dtype=np.int64)
        self.index[features] = (groups * self.group).astype(np.int32)
        self.keys[0] = -1
        self.keys[groups] = features
        self.used = len(features) + 1
        self.put(self.index[h].astype(np.int64) + k, values)

    def copy(self) -> "RowPool":
        out = RowPool.__new__(RowPool)
        out.block_rows, out.group, out.slots, out.used = self.block_rows, self.group, self.slots, self.used
        out.split = self.split
        out.index = zeroed_index(self.block_rows)
        touched = self.keys[1:self.used]
        out.index[touched] = self.index[touched]
        out.keys = self.keys.copy()
        if self.split > 1:   # each region's used rows, into regions of the copy's capacity
            out.state = np.zeros((out.capacity * self.group, self.slots), self.state.dtype)
            out.regions()[:, :self.used * self.group] = self._used_regions()
        else:
            out.state = self.state.copy()
        return out

    def __deepcopy__(self, memo) -> "RowPool":
        return self.copy()   # not the reservation: its whole address space would be copied

    def snapshot(self) -> tuple:
        if self.split > 1:
            return self.used, self._used_regions().copy()
        return self.used, self.state[:self.used * self.group].copy()

    def restore(self, saved: tuple) -> None:
        """Back to a ``snapshot``: groups handed out since hold the template again (their
        features keep them: a group holding the template is what an untouched row is)."""
        used, values = saved
        if self.split > 1:   # (a zero template)
            regions = self.regions()
            regions[:, :used * self.group] = values
            regions[:, used * self.group:self.used * self.group] = 0.0
            return
        template = values[:self.group].copy()
        self.state[:used * self.group] = values
        if np.any(template != 0):     # every free row holds the template too
            self.state[used * self.group:] = np.tile(template, (self.capacity - used, 1))
        else:
            self.state[used * self.group:self.used * self.group] = 0.0

    def all_finite(self) -> bool:
        if self.split > 1:
            return bool(np.isfinite(self._used_regions()).all())
        return bool(np.isfinite(self.state[:self.used * self.group]).all())

