"""The actors of an agent: supervisors, the agent (a shell around the invocation
machine, composed of parts), nodes, edges, reducers and the edge watcher. They
carry out what the invocation machine (:mod:`hayata_py._invocation`) and the
runtime's pure rules (:mod:`hayata_py._rules`) decide."""
