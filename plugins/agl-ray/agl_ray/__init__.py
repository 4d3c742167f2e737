"""agl-ray: an execution strategy that runs agl runners as Ray actors."""
