"""Test data drawn with NumPy (no JAX compilation per shape), shared by several test files."""

import jax.numpy as jnp
import numpy as np

from iclgd import tasks
from iclgd.tasks import TaskBatch


def regression_tasks(
    seed: int, B: int = 6, n: int = 9, d: int = 4, noise_std: float = 0.3
) -> TaskBatch:
    """Random prompts, x ~ N(0, Sigma) with an anisotropic Sigma, noisy
    labels (Lemma 2 needs neither).

    Drawn with numpy: sampling with JAX would compile a kernel per shape,
    which dominates the run time.
    """
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(d, d)) / np.sqrt(d) + 0.7 * np.eye(d)  # Sigma = F F^T
    xs = rng.normal(size=(B, n + 1, d)) @ F.T
    w = rng.normal(size=(B, d))
    ys = np.einsum("bcd,bd->bc", xs, w) + noise_std * rng.normal(size=(B, n + 1))
    return TaskBatch(
        X=jnp.asarray(xs[:, :n]),
        y=jnp.asarray(ys[:, :n]),
        x_q=jnp.asarray(xs[:, n]),
        y_target=jnp.asarray(ys[:, n]),
        w=jnp.asarray(w),
    )


def numpy_spec(seed, K, d, m, N, tau):
    """A spec from NumPy randomness (cheap: no extra threefry compilation)."""
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((K, d))
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    return tasks.make_representation_spec(
        None, K=K, d=d, m=m, N=N, tau=tau, tokens=t, features=rng.standard_normal((K, m))
    )
