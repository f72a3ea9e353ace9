"""The promotion gate on rows made up for the purpose: guards, the sign test, the
clustered interval from 30 tasks up, the minimum effect, the cost."""

from mol.eval.evolve.gate import decide
from mol.eval.stats import mean_interval, sign_test_greater, t975
from mol.eval.store import Episode
from mol.hcp.evolvable import EvolveConfig

CONFIG = EvolveConfig()


def rows(outcomes: dict[str, str], tokens: int = 100, sec: float = 2.0) -> list[Episode]:
    """One episode per task and epoch: ``outcomes`` maps a task to its epochs' outcomes
    (``"pf"``: a pass, then a fail)."""
    return [Episode(task, epoch, "t", "h", "mol", "", outcome="pass" if o == "p" else "fail",
                    prompt_tokens=tokens, agent_sec=sec)
            for task, os_ in outcomes.items() for epoch, o in enumerate(os_, 1)]


def test_the_sign_test_and_the_t_quantiles():
    assert sign_test_greater(5, 0) == 1 / 32
    assert sign_test_greater(2, 1) == 0.5
    assert sign_test_greater(0, 0) == 1.0
    assert abs(t975(1) - 12.706205) < 1e-6
    assert abs(t975(31) - 2.039513) < 1e-4 and abs(t975(200) - 1.971896) < 1e-4
    mean, low, high = mean_interval([1.0, 1.0, 0.0, 1.0])
    assert mean == 0.75 and low < 0.75 < high


def test_five_wins_of_five_promote_and_two_wins_one_loss_is_inconclusive():
    parent = rows({f"t{i}": "f" for i in range(5)} | {"kept": "p"})
    fixed = rows({f"t{i}": "p" for i in range(5)} | {"kept": "p"})
    verdict = decide(parent, fixed, [f"t{i}" for i in range(5)] + ["kept"], set(), 13, CONFIG)
    assert verdict.outcome == "promote", verdict
    assert verdict.evidence["p"] == 0.03125 and verdict.evidence["wins"] == 5

    mixed = rows({"t0": "p", "t1": "p", "kept": "f"})
    verdict = decide(parent, mixed, ["t0", "t1", "kept"], set(), 13, CONFIG)
    assert verdict.outcome == "inconclusive"
    assert "2 wins, 1 losses" in verdict.reason and verdict.needs
    assert any("more epochs" in need for need in verdict.needs)


def test_a_broken_guard_rejects_whatever_else_improves():
    parent = rows({"guard": "pp"} | {f"t{i}": "ff" for i in range(6)})
    candidate = rows({"guard": "pf"} | {f"t{i}": "pp" for i in range(6)})
    verdict = decide(parent, candidate, ["guard"] + [f"t{i}" for i in range(6)], {"guard"},
                     7, CONFIG)
    assert verdict.outcome == "reject"
    assert verdict.reason == "guard regressed: guard (2/2 -> 1/2)"
    # a guard that was not solid (k/k) in the parent may fail
    parent = rows({"guard": "pf"} | {f"t{i}": "ff" for i in range(6)})
    assert decide(parent, candidate, ["guard"] + [f"t{i}" for i in range(6)], {"guard"}, 7,
                  CONFIG).outcome == "promote"


def test_no_net_win_rejects_and_nothing_affected_is_inconclusive():
    parent, candidate = rows({"a": "p", "b": "f"}), rows({"a": "f", "b": "p"})
    assert decide(parent, candidate, ["a", "b"], set(), 2, CONFIG).outcome == "reject"
    verdict = decide(parent, candidate, [], set(), 2, CONFIG)
    assert verdict.outcome == "inconclusive" and "wider slice" in verdict.needs[0]


def test_from_thirty_tasks_the_clustered_interval_decides():
    names = [f"t{i:02}" for i in range(40)]
    parent = rows(dict.fromkeys(names, "ff"))
    many = rows({n: "pp" if i < 12 else "ff" for i, n in enumerate(names)})
    verdict = decide(parent, many, names, set(), 40, CONFIG)
    assert verdict.outcome == "promote" and verdict.evidence["test"] == "interval"
    assert verdict.evidence["interval"][0] > 0
    few = rows({n: "pp" if i < 2 else "ff" for i, n in enumerate(names)})
    verdict = decide(parent, few, names, set(), 40, CONFIG)
    assert verdict.outcome == "inconclusive" and "includes 0" in verdict.reason


def test_the_minimum_effect_holds_back_a_significant_but_small_gain():
    names = [f"t{i:02}" for i in range(40)]
    parent = rows(dict.fromkeys(names, "ff"))
    candidate = rows({n: "pp" if i < 12 else "ff" for i, n in enumerate(names)})
    strict = EvolveConfig(min_effect={"points": 50})
    verdict = decide(parent, candidate, names, set(), 40, strict)
    assert verdict.outcome == "inconclusive" and "minimum effect" in verdict.reason


def test_a_costlier_candidate_is_rejected_or_inconclusive():
    names = [f"t{i}" for i in range(6)]
    parent = rows(dict.fromkeys(names, "f"), tokens=1000)
    dearer = rows(dict.fromkeys(names, "p"), tokens=1500)
    verdict = decide(parent, dearer, names, set(), 6, CONFIG)
    assert verdict.outcome == "reject" and verdict.reason.startswith("cost: tokens")
    within = rows(dict.fromkeys(names, "p"), tokens=1080)
    assert decide(parent, within, names, set(), 6, CONFIG).outcome == "promote"
    # one task much dearer, the rest cheaper: the mean excess is above 0, its interval is not
    uneven = [*rows({n: "p" for n in names[:5]}, tokens=900), *rows({names[5]: "p"},
                                                                     tokens=3000)]
    verdict = decide(parent, uneven, names, set(), 6, CONFIG)
    assert verdict.outcome == "inconclusive" and "cost may be worse" in verdict.reason
    slower = rows(dict.fromkeys(names, "p"), sec=2.5)  # under the 1 s floor
    assert decide(rows(dict.fromkeys(names, "f")), slower, names, set(), 6,
                  CONFIG).outcome == "promote"
