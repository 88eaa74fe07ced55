"""Tasks: the prompt distributions of the three papers, their samplers and embeddings.

* :mod:`iclgd.tasks.linear` -- in-context linear regression (Parts I and III): :class:`Prior`,
  :func:`sample_tasks`, :func:`embed`, :func:`embed_zero_query`, and Part III's
  :func:`sample_paper_prompts` and :func:`paper_prompt_sigma`;
* :mod:`iclgd.tasks.representation` -- in-context learning with representations (Part II):
  :class:`RepresentationSpec`, :func:`sample_representation_tasks`.
"""

from .linear import (
    Prior,
    TaskBatch,
    check_batch,
    check_prior,
    embed,
    embed_zero_query,
    haar_orthogonal,
    linear_guess,
    make_prior,
    paper_prompt_sigma,
    paper_sigma,
    sample_paper_prompts,
    sample_tasks,
    sample_tasks_reference,
    standard_normal,
    unembed,
)
from .representation import (
    RepresentationBatch,
    RepresentationSpec,
    check_spec,
    embed_representation,
    make_representation_spec,
    random_dictionary,
    representation_labels,
    sample_lambda,
    sample_representation_tasks,
    sample_training_prompts,
)

__all__ = [
    "Prior",
    "TaskBatch",
    "make_prior",
    "check_prior",
    "check_batch",
    "sample_tasks",
    "sample_tasks_reference",
    "standard_normal",
    "embed",
    "embed_zero_query",
    "linear_guess",
    "unembed",
    "haar_orthogonal",
    "paper_sigma",
    "paper_prompt_sigma",
    "sample_paper_prompts",
    "RepresentationSpec",
    "RepresentationBatch",
    "make_representation_spec",
    "check_spec",
    "random_dictionary",
    "sample_lambda",
    "representation_labels",
    "sample_representation_tasks",
    "sample_training_prompts",
    "embed_representation",
]
