"""The actors of an agent: supervisors, agent, node, edge, reducer, edge watcher."""
