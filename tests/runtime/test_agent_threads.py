"""AgentSystem and AgentRef used from several threads at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import hayata_py as hy


def test_threads_get_their_own_replies(agents: hy.AgentSystem) -> None:
    refs = [agents.start_agent(hy.AgentConfig(
        f"t{i}", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
        for i in range(4)]

    def drive(index: int) -> list[tuple[str, object]]:
        agent = refs[index]
        seen = []
        for n in range(8):
            value = f"{index}-{n}"
            if n % 2:
                inv = agent.run({"steps": [["next", "w", {}], ["finish", value]]},
                                subscriber=hy.CALLER, stream=True)
                messages = list(agent.messages(inv, timeout=60))
                assert all(m.invocation_id == inv for m in messages)
                result = messages[-1]
            else:
                inv = agent.run({"steps": [["next", "w", {}], ["finish", value]]})
                result = agent.wait(inv, 60)
            assert isinstance(result, hy.AgentResult)
            assert agent.status() == "idle"
            assert agent.get_result(inv) == result
            seen.append((value, result.result))
        return seen

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(drive, range(4)))
    for index, seen in enumerate(outcomes):
        assert seen == [(f"{index}-{n}", f"{index}-{n}") for n in range(8)]


def test_endpoints_of_ended_threads_are_closed(agents: hy.AgentSystem) -> None:
    import threading

    import psutil

    agents.agents()

    def one_call() -> None:
        assert agents.agents() == []

    def fds() -> int:
        return psutil.Process().num_fds()

    for _ in range(3):  # warm up: one live endpoint at a time
        t = threading.Thread(target=one_call)
        t.start()
        t.join()
    before = fds()
    for _ in range(20):
        t = threading.Thread(target=one_call)
        t.start()
        t.join()
    assert fds() - before <= 4, "each short-lived thread must not keep a socket"
    assert len(agents._system._clones) <= 2
