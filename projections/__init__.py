"""What MACE derives from the ordered events: reducers, replay, diffs, reports. Pure."""
