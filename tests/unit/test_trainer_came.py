"""CAME (Luo et al., ACL 2023, "CAME: Confidence-guided Adaptive Memory Efficient Optimization")
against the paper's own update rule.

The reference below is Algorithm 1 of the paper written out with its row and column SUMS
(R_t = ... (G_t^2 + eps1 1 1^T) 1_m, V_t = R_t C_t / (1_n^T R_t), the instability
U'_t = (U_hat_t - M_t)^2 + eps2 1 1^T, S_t = R'_t C'_t / (1_n^T R'_t), X_t = X_{t-1} - eta M_t / sqrt(S_t)),
independently of trainctl's implementation, which keeps row and column MEANS (as Adafactor's
code does). The two must give the same parameters step after step.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from trainctl.runtime.trainer import CAME  # noqa: E402


def paper_came(x0, grads, *, lr, b1, b2, b3, e1, e2, d):
    """Algorithm 1 of the paper for one n x m matrix parameter, in float64."""
    x = x0.clone().double()
    n, m = x.shape
    ones_m, ones_n = torch.ones(m, 1, dtype=torch.float64), torch.ones(1, n, dtype=torch.float64)
    r, c = torch.zeros(n, 1, dtype=torch.float64), torch.zeros(1, m, dtype=torch.float64)
    r2, c2 = torch.zeros(n, 1, dtype=torch.float64), torch.zeros(1, m, dtype=torch.float64)
    mom = torch.zeros(n, m, dtype=torch.float64)
    out = []
    for g in grads:
        g = g.double()
        sq = g * g + e1
        r = b2 * r + (1 - b2) * (sq @ ones_m)
        c = b2 * c + (1 - b2) * (ones_n @ sq)
        v = (r @ c) / (ones_n @ r)
        u = g / v.sqrt()
        u_hat = u / torch.clamp(u.pow(2).mean().sqrt() / d, min=1.0)
        mom = b1 * mom + (1 - b1) * u_hat
        inst = (u_hat - mom) ** 2 + e2
        r2 = b3 * r2 + (1 - b3) * (inst @ ones_m)
        c2 = b3 * c2 + (1 - b3) * (ones_n @ inst)
        s = (r2 @ c2) / (ones_n @ r2)
        x = x - lr * mom / s.sqrt()
        out.append(x.clone())
    return out


@pytest.mark.parametrize("shape", [(6, 4), (3, 17), (32, 8)])
def test_came_matches_the_papers_algorithm_step_by_step(shape) -> None:
    gen = torch.Generator().manual_seed(sum(shape))
    x0 = torch.randn(*shape, generator=gen, dtype=torch.float64)
    # Gradients with a scale that varies by row and step, so the factored moments matter.
    grads = [
        torch.randn(*shape, generator=gen, dtype=torch.float64) * (1 + t) * torch.linspace(0.1, 3, shape[0])[:, None]
        for t in range(6)
    ]
    hp = dict(lr=1e-2, b1=0.9, b2=0.999, b3=0.9999, e1=1e-30, e2=1e-16, d=1.0)
    expected = paper_came(x0, grads, **hp)

    p = torch.nn.Parameter(x0.clone())
    opt = CAME([p], lr=hp["lr"], betas=(hp["b1"], hp["b2"], hp["b3"]), eps=(hp["e1"], hp["e2"]), clip_threshold=hp["d"])
    for g, want in zip(grads, expected):
        p.grad = g.clone()
        opt.step()
        torch.testing.assert_close(p.detach(), want, rtol=1e-9, atol=1e-12)


def test_came_moves_against_the_gradient_and_clips_large_updates() -> None:
    # One step from zero moments: M_1 = (1 - b1) U_hat_1, S_1 ~ (1 - b3) (U_hat - M)^2, so the step has the
    # sign of -G, and the RMS clip keeps U_hat's RMS at most d however large G is.
    p = torch.nn.Parameter(torch.zeros(4, 4, dtype=torch.float64))
    g = torch.full((4, 4), 1e6, dtype=torch.float64)
    g[0, 0] = -1e6
    p.grad = g
    CAME([p], lr=1e-3).step()
    assert (torch.sign(p.detach()) == -torch.sign(g)).all()
    assert p.detach().abs().max() < 1.0  # bounded by lr x clipped update / sqrt(instability), not by |G|
