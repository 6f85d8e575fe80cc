"""A module of agent code that fails as it is imported (`mace reexecute --agent` names it)."""

raise RuntimeError("this module is broken")
