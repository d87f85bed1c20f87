"""Two versions of namespace `opwire_bc`, one schema per bc-check change class (only v2 is ever registered)."""

from __future__ import annotations

import torch

NS = "opwire_bc"
_SAME = [
    "opwire_bc::same(Tensor x) -> Tensor",
]
V1 = [
    *_SAME,
    "opwire_bc::gone(Tensor x) -> Tensor",
    "opwire_bc::multi(Tensor x) -> Tensor",
    "opwire_bc::multi.extra(Tensor x, int n) -> Tensor",
    "opwire_bc::rm_arg(Tensor x, int n, int m) -> Tensor",
    "opwire_bc::rename(Tensor x, int n) -> Tensor",
    "opwire_bc::reorder(Tensor x, int a, float b) -> Tensor",
    "opwire_bc::retype(Tensor x, int n) -> Tensor",
    "opwire_bc::widen(Tensor x, int n) -> Tensor",
    "opwire_bc::add_req(Tensor x) -> Tensor",
    "opwire_bc::add_def(Tensor x) -> Tensor",
    "opwire_bc::insert_def(Tensor x, int a=1) -> Tensor",
    "opwire_bc::def_change(Tensor x, int n=1) -> Tensor",
    "opwire_bc::def_remove(Tensor x, int n=1) -> Tensor",
    "opwire_bc::def_add(Tensor x, int n) -> Tensor",
    "opwire_bc::kwonly(Tensor x, int n) -> Tensor",
    "opwire_bc::alias(Tensor x) -> Tensor",
    "opwire_bc::ret(Tensor x) -> Tensor",
]
V2 = [
    *_SAME,
    "opwire_bc::multi(Tensor x) -> Tensor",
    "opwire_bc::rm_arg(Tensor x, int n) -> Tensor",
    "opwire_bc::rename(Tensor x, int count) -> Tensor",
    "opwire_bc::reorder(Tensor x, float b, int a) -> Tensor",
    "opwire_bc::retype(Tensor x, float n) -> Tensor",
    "opwire_bc::widen(Tensor x, SymInt n) -> Tensor",
    "opwire_bc::add_req(Tensor x, int n) -> Tensor",
    "opwire_bc::add_def(Tensor x, int n=1) -> Tensor",
    "opwire_bc::insert_def(Tensor x, int b=0, int a=1) -> Tensor",
    "opwire_bc::def_change(Tensor x, int n=2) -> Tensor",
    "opwire_bc::def_remove(Tensor x, int n) -> Tensor",
    "opwire_bc::def_add(Tensor x, int n=1) -> Tensor",
    "opwire_bc::kwonly(Tensor x, *, int n) -> Tensor",
    "opwire_bc::alias(Tensor(a!) x) -> Tensor(a!)",
    "opwire_bc::ret(Tensor x) -> (Tensor, Tensor)",
    "opwire_bc::new_op(Tensor x) -> Tensor",
]


def register(schemas: list[str]) -> torch.library.Library:
    """Define `schemas` in the dispatcher (each process may register one version only)."""
    lib = torch.library.Library(NS, "FRAGMENT")
    for schema in schemas:
        lib.define(schema.split("::", 1)[1])
    return lib
