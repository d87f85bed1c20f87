"""What a serialized argument names beyond values: dispatcher ops (`as_operator`) and subgraphs (`as_graph`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opwire.errors import BindError
from opwire.proxy_executor.exec_policy import ExecPolicy
from opwire.proxy_executor.targets import resolve
from opwire.schema import models as m

__all__ = ["BindContext"]


class BindContext:
    """Resolves what arguments name beyond values: operators (`as_operator`) and subgraphs (`as_graph`).

    Carries the execution policy every node bound with it obeys (`safety.ExecPolicy`: refused ops, budgets).
    """

    def __init__(
        self,
        subgraph_runner: Callable[[m.GraphArgument], Any] | None = None,
        exec_policy: ExecPolicy | None = None,
    ) -> None:
        self.subgraph_runner = subgraph_runner
        self.exec_policy = exec_policy if exec_policy is not None else ExecPolicy()

    def operator(self, name: str, where: str) -> Any:
        """The op an `as_operator` argument names (only dispatcher ops the execution policy allows)."""
        target = resolve(name)
        if target.kind != "op":
            raise BindError(f"{where}: as_operator names {name!r}, expected a dispatcher op such as 'aten::add.Tensor'")
        self.exec_policy.check(target, where)
        return target.fn

    def subgraph(self, graph: m.GraphArgument, where: str) -> Any:
        """A callable running subgraph `graph` (needs a graph runner)."""
        if self.subgraph_runner is None:
            raise BindError(
                f"{where}: passes subgraph {graph.name!r}; the proxy executor runs single kernels, "
                "run the whole program with opwire.run_program (its graph runner executes subgraphs)"
            )
        return self.subgraph_runner(graph)
