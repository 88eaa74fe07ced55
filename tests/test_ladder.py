"""The risk ladder (iclgd.ladder): ridge risk, the rungs, the theorems between them, the table and
the figure (iclgd.plot.risk_ladder)."""

import jax
import matplotlib
import numpy as np
import pytest

import iclgd
import iclgd.plot
from iclgd import exact, ladder

matplotlib.use("Agg")

SIG = np.array([[1.5, 0.3], [0.3, 0.6]])


def _ridge_mc(prior, C, lam, key, n=100_000):
    """Squared errors of the ridge prediction on sampled prompts: (mean, standard error)."""
    t = iclgd.sample_tasks(key, prior, C, n)
    X, y = np.asarray(t.X, np.float64), np.asarray(t.y, np.float64)
    G = np.einsum("nci,ncj->nij", X, X) / C + lam * np.eye(prior.d)
    w = np.linalg.solve(G, np.einsum("nci,nc->ni", X, y)[..., None] / C)[..., 0]
    err = (np.einsum("ni,ni->n", w, np.asarray(t.x_q, np.float64)) - np.asarray(t.y_target)) ** 2
    return err.mean(), err.std() / np.sqrt(n)


def test_ridge_risk_matches_sampled_prompts():
    prior = iclgd.make_prior(2, mu=[1.0, -0.5], Sigma=SIG, noise_std=0.5)
    r = ladder.ridge_risk(prior, 3, lam=0.2, key=jax.random.key(0), n_mc=20_000)
    assert r.method == "monte carlo" and r.lam == 0.2 and r.stderr > 0
    mc, se = _ridge_mc(prior, 3, 0.2, jax.random.key(1))
    assert abs(r.risk - mc) < 4 * np.hypot(r.stderr, se)
    # Rao-Blackwellised: per draw, far less noisy than the squared errors of sampled prompts
    assert r.stderr * np.sqrt(20_000) < 0.5 * se * np.sqrt(100_000)


def test_ridge_closed_form_and_ridgeless_limit():
    assert ladder.ridge_risk(iclgd.make_prior(3, Sigma=np.diag([1.0, 2.0, 3.0])), 3) == (
        0.0,
        0.0,
        0.0,
        "closed form",
    )  # noise-free, C >= d: least squares recovers w
    r = ladder.ridge_risk(iclgd.make_prior(4), 2, lam=0.0, n_mc=200)  # C < d: min-norm fit
    assert r.risk == pytest.approx(4 - 2, rel=1e-12)  # = Bayes, (1 - C/d) tr(Sigma Omega)
    assert r.stderr < 1e-12


def test_tuned_ridge_is_bayes_when_bayes_is_ridge():
    s = 0.7  # Sigma = Omega = I, mu = 0: the posterior mean is ridge with lam = s^2 / C
    prior, C = iclgd.make_prior(3, noise_std=s), 4
    b = exact.bayes_risk(prior, C, n_mc=20_000, key=jax.random.key(2))
    r = ladder.ridge_risk(prior, C, key=jax.random.key(3), n_mc=20_000)
    assert r.lam == pytest.approx(s**2 / C, rel=0.3)
    assert abs(r.risk - b.risk) < 4 * np.hypot(r.stderr, b.stderr)
    worse = ladder.ridge_risk(prior, C, lam=10 * s**2 / C, key=jax.random.key(3), n_mc=20_000)
    assert worse.risk > r.risk + 4 * np.hypot(r.stderr, worse.stderr)


def test_ridge_bad_input():
    p = iclgd.make_prior(2)
    with pytest.raises(TypeError, match="prior"):
        ladder.ridge_risk("prior", 3)
    with pytest.raises(ValueError, match="C must be"):
        ladder.ridge_risk(p, 0)
    with pytest.raises(ValueError, match="lam"):
        ladder.ridge_risk(p, 3, lam=-1.0)
    with pytest.raises(ValueError, match="n_mc"):
        ladder.ridge_risk(p, 1, n_mc=1)
    with pytest.raises(TypeError, match="key"):
        ladder.ridge_risk(p, 1, key=3)


def test_settings_and_null_risk():
    Om = np.linalg.inv(SIG)
    assert ladder.is_part1(iclgd.make_prior(2, mu=[1.0, 2.0]))
    assert not ladder.is_part1(iclgd.make_prior(2, noise_std=0.1))
    assert ladder.is_theorem1(iclgd.make_prior(2, Sigma=SIG))
    assert not ladder.is_theorem1(iclgd.make_prior(2, mu=[1.0, 0.0], Sigma=SIG))
    assert ladder.is_part3(iclgd.make_prior(2, Sigma=SIG, Omega=Om))
    assert not ladder.is_part3(iclgd.make_prior(2, Sigma=SIG))
    p = iclgd.make_prior(2, mu=[1.0, 2.0], noise_std=0.5)
    assert ladder.null_risk(p) == pytest.approx(2 + 5 + 0.25)


@pytest.fixture(scope="module")
def ladders():
    kw = dict(n_mc=2000, lsa_restarts=2, lsa_steps=100, lsa_method="subspace")  # the chapter: auto
    return {
        "part1": ladder.risk_ladder(iclgd.make_prior(2, mu=[1.0, -1.0]), 3, **kw),
        "thm1": ladder.risk_ladder(iclgd.make_prior(2, Sigma=SIG), 1, **kw),
        "part3": ladder.risk_ladder(
            iclgd.make_prior(2, Sigma=SIG, Omega=np.linalg.inv(SIG)), 3, **kw
        ),
        "noisy": ladder.risk_ladder(iclgd.make_prior(2, mu=[0.5, 0.0], noise_std=0.3), 3, **kw),
    }


def test_ladder_rungs_and_skips(ladders):
    every = set(ladder.RUNGS)
    for name, lad in ladders.items():
        assert set(lad.keys()) | set(lad.skipped) == every, name
        assert lad.keys() == [k for k in ladder.RUNGS if k in lad.keys()]  # in RUNGS' order
        assert all(np.isfinite(r.risk) and r.risk >= 0 for r in lad.rungs)
    assert "eq8" in ladders["thm1"].keys() and "eq8" in ladders["part3"].skipped
    assert {"sparse2", "sparse3", "gdpp2", "gdpp3"} <= set(ladders["part3"].keys())
    assert "pgd1" in ladders["noisy"].skipped and "noise" in ladders["noisy"].skipped["pgd1"]
    assert ladders["noisy"].get("bayes").method == "monte carlo"
    with pytest.raises(KeyError, match="Theorem 1"):
        ladders["part1"].get("eq8")


def test_ladder_values(ladders):
    p1 = ladders["part1"]  # Part I: y_q-LSA = GD from mu = d(d+1)/(C+d+1); gap 2|mu|^2/(Cd+2)
    assert p1.risk("yq_lsa") == pytest.approx(6 / 6, rel=1e-8)
    assert p1.risk("gd_mu") == pytest.approx(1.0, rel=1e-10)
    assert p1.risk("lsa_d") - p1.risk("gd_mu") == pytest.approx(2 * 2 / 8, rel=1e-8)
    assert p1.risk("bayes") == 0.0 and p1.risk("ridge") == 0.0  # C >= d, noise-free
    p3 = ladders["part3"]  # on S, optimal sparse TF = tuned preconditioned GD
    assert p3.risk("sparse3") == pytest.approx(p3.risk("pgd3"), rel=1e-9)


def test_relations_hold_and_can_fail(ladders):
    for name, lad in ladders.items():
        checked = ladder.check_relations(lad)
        assert checked and all(ok for *_, ok in checked), name
    lad = ladders["part1"]
    names = {(r.lhs, r.op, r.rhs) for r in ladder.relations(lad)}
    assert ("yq_lsa", "==", "gd_mu") in names and ("lsa_d", "<=", "lsa1") in names
    assert ("lt1", "==", "eq8") not in names  # eq. 8 is not on a Part I ladder with mu != 0
    bad = lad._replace(
        rungs=tuple(r._replace(risk=2 * r.risk) if r.key == "lsa_d" else r for r in lad.rungs)
    )
    failed = {(r.lhs, r.rhs) for r, _, _, ok in ladder.check_relations(bad) if not ok}
    assert ("lsa_d", "lsa1") in failed and ("yq_lsa", "lsa_d") not in failed


def test_relations_by_construction_are_not_theorems(ladders):
    kinds = {(r.lhs, r.rhs): r.theorem for r in ladder.relations(ladders["part3"])}
    assert not kinds["pgd3", "pgd2"] and not kinds["gdpp3", "sparse3"]  # by construction
    assert kinds["sparse3", "pgd3"] and kinds["lsa1", "lt1"]  # theorems
    zero = ladders["part1"].get("bayes").risk == 0.0  # C >= d, no noise: Bayes is exactly 0
    assert zero and not any(
        r.theorem for r in ladder.relations(ladders["part1"]) if r.lhs == "bayes"
    )
    noisy = [r for r in ladder.relations(ladders["noisy"]) if r.lhs == "bayes"]
    assert noisy and all(r.theorem for r in noisy)  # a positive Bayes risk: a real comparison


def test_ladder_bad_input():
    p = iclgd.make_prior(2)
    with pytest.raises(TypeError, match="prior"):
        ladder.risk_ladder(np.eye(2), 3)
    with pytest.raises(TypeError, match="C must be"):
        ladder.risk_ladder(p, "3")
    with pytest.raises(ValueError, match="C must be"):
        ladder.risk_ladder(p, 0)
    with pytest.raises(ValueError, match="lsa_restarts"):
        ladder.risk_ladder(p, 3, lsa_restarts=0)
    with pytest.raises(ValueError, match="lsa_method"):
        ladder.risk_ladder(p, 3, lsa_method="lbfgs")
    with pytest.raises(TypeError, match="lad"):
        ladder.relations({"bayes": 0.0})
    with pytest.raises(ValueError, match="z must be"):
        ladder.relations(ladder.Ladder(p, 3, (), {}), z=0.0)


def test_format_table(ladders):
    text = ladder.format_table({"P1": ladders["part1"], "noisy": ladders["noisy"]}, digits=3)
    lines = text.splitlines()
    assert lines[0].split() == ["rung", "P1", "noisy"]
    row = {ln[:28].strip(): ln[28:].split() for ln in lines[1:]}
    assert row["Bayes posterior mean"][0] == "0" and "±" in row["Bayes posterior mean"][1]
    gd0 = ladders["part1"].risk("gd0")  # Sigma = I: the preconditioned step is plain GD
    assert row["1 precond. GD step"] == [f"{gd0:.3g}", "-"]  # noisy: not applicable
    with pytest.raises(TypeError, match="ladders"):
        ladder.format_table([ladders["part1"]])
    with pytest.raises(ValueError, match="digits"):
        ladder.format_table({"P1": ladders["part1"]}, digits=0)


def test_risk_ladder_figure(ladders):
    fig = iclgd.plot.risk_ladder(
        {"a": [ladders["part1"], ladders["thm1"]], "b": [ladders["part3"]]},
        [("a", 3, "yq_lsa", "1")],
    )
    assert len(fig.axes) == 2 and fig.get_size_inches()[0] <= 8.0
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0] == "Bayes posterior mean" and len(labels) == len(ladder.RUNGS)
    with pytest.raises(ValueError, match="ladders"):
        iclgd.plot.risk_ladder({})
    with pytest.raises(ValueError, match="claims"):
        iclgd.plot.risk_ladder({"a": [ladders["part1"]]}, [("a", 3)])
    with pytest.raises(ValueError, match="sequence"):
        iclgd.plot.risk_ladder({"a": ladders["part1"]})
