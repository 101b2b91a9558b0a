"""The LUT manager: every loaded LUT of a scenario behind one lookup."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from simulator.errors import InputError, make_issue
from simulator.lut.interpolate import OutOfRange
from simulator.lut.table import LutGrid, LutKey, LutResult, LutTable, unknown_key_issue


class LutManager:
    """Routes each lookup to the one table that provides its key.

    A key may come from one file only; adding a second file with a key already
    present is an input error. Adding the same file (same path and content)
    again changes nothing.

    Args:
        tables: Tables to add at once (see :meth:`add`).
    """

    def __init__(self, tables: Iterable[LutTable] = ()) -> None:
        self._tables: list[LutTable] = []
        self._by_key: dict[LutKey, LutTable] = {}
        self._lookups: dict[LutKey, Callable[[LutKey, float, float, float, OutOfRange], LutResult]]
        self._lookups = {}
        for table in tables:
            self.add(table)

    def __reduce__(self) -> tuple[type[LutManager], tuple[tuple[LutTable, ...]]]:
        """Pickle as the tables (their memoised lookups are rebuilt on unpickling)."""
        return (type(self), (tuple(self._tables),))

    def __repr__(self) -> str:
        return f"LutManager({len(self._tables)} tables, {len(self._by_key)} keys)"

    def add(self, table: LutTable) -> None:
        """Add a table's keys.

        Raises:
            InputError: One issue per key that another file already provides,
                naming both files; nothing is added then.
        """
        for held in self._tables:
            same_file = held.path == table.path and held.digest == table.digest != ""
            if held is table or same_file:
                return
        issues = []
        for key in sorted(table.keys() & self._by_key.keys(), key=lambda k: k.describe()):
            other = self._by_key[key]
            issues.append(
                make_issue(
                    table.path,
                    f"rows with {key.describe()}",
                    table.path.name,
                    f"each key in one LUT file only; {other.path} already provides it",
                    f"key provided by two LUT files: {other.path} and {table.path}",
                )
            )
        if issues:
            raise InputError(issues)
        self._tables.append(table)
        self._by_key.update(dict.fromkeys(table.keys(), table))
        self._lookups.update(dict.fromkeys(table.keys(), table.memoised_lookup()))

    def tables(self) -> tuple[LutTable, ...]:
        """Return the tables added, in order."""
        return tuple(self._tables)

    def keys(self) -> frozenset[LutKey]:
        """Return every key any table provides."""
        return frozenset(self._by_key)

    def has(self, key: LutKey) -> bool:
        """Return whether some table provides ``key``."""
        return key in self._by_key

    def table_for(self, key: LutKey) -> LutTable:
        """Return the table providing ``key``.

        Raises:
            InputError: No table provides ``key``; the message lists the keys
                present for its model and hardware.
        """
        table = self._by_key.get(key)
        if table is None:
            files = ", ".join(str(t.path) for t in self._tables) or "(no LUT files loaded)"
            raise InputError([unknown_key_issue(files, key, self._by_key)])
        return table

    def grid(self, key: LutKey) -> LutGrid:
        """Return the sorted context_len, microbatch and fanout_k axes of ``key``.

        Raises:
            InputError: No table provides ``key``.
        """
        return self.table_for(key).grid(key)

    def has_energy(self, key: LutKey) -> bool:
        """Return whether the rows of ``key`` carry energy (some ``energy_mj`` > 0).

        Raises:
            InputError: No table provides ``key``.
        """
        return self.table_for(key).has_energy(key)

    def lookup(
        self,
        key: LutKey,
        context_len: float,
        microbatch: float,
        fanout_k: float,
        out_of_range: OutOfRange = "raise",
    ) -> LutResult:
        """Return the cost of one iteration of ``key`` (see :meth:`LutTable.lookup`).

        Raises:
            InputError: No table provides ``key``, or a value is outside the
                grid and ``out_of_range`` is ``raise``.
        """
        memo = self._lookups.get(key)
        if memo is None:
            return self.table_for(key).lookup(key, context_len, microbatch, fanout_k, out_of_range)
        return memo(key, context_len, microbatch, fanout_k, out_of_range)
