"""The rpart-like tree listing: rule text of factor splits, and what a leaf shows per kind of tree."""

import numpy as np

from bartpy_suite._binning import BinnedPredictors
from bartpy_suite.posterior.tree_text import _levels_text, format_tree


def test_factor_rule_lists_only_levels_present_at_the_node():
    # Levels A-D; only A and C reach the node. The mask's bits for the absent B and D are
    # arbitrary (drawn uniformly by the sampler), so printing them would misstate the rule.
    assert _levels_text(0b0011, ["A", "B", "C", "D"], {0, 2}) == ("{A}", "{C}")
    assert _levels_text(0b1100, ["A", "B", "C", "D"], {0, 1, 2, 3}) == ("{C,D}", "{A,B}")


def _one_split(leaf_model=None, classes=("low", "mid", "high"), trees=1):
    """A stump split at x <= 0.5 over four training rows (x = 0, 0, 1, 1; classes 0, 2, 1, 1)."""
    binned = BinnedPredictors(np.array([[0, 0, 1, 1]], dtype=np.int32), (np.array([0.5]),), np.array([2]),
                              np.array([False]))
    arrays = {"split_var": np.array([0, -1, -1]), "split_cut": np.array([0, 0, 0]),
              "left_child": np.array([1, -1, -1]), "right_child": np.array([2, -1, -1]),
              "leaf_value": np.array([0.0, -0.25, 0.75]),
              "leaf_prob": np.array([[0, 0, 0], [0.6, 0.1, 0.3], [0.05, 0.9, 0.05]])}
    if leaf_model is not None:
        del arrays["leaf_prob"]
    config = {"response_kind": "categorical", "class_labels": list(classes), "leaf_model": leaf_model,
              "trees": trees}
    return arrays, binned, config


def test_classification_leaves_list_class_labels_in_class_order():
    arrays, binned, config = _one_split()
    text = format_tree(arrays, binned, ["x"], config, None, np.array([0, 2, 1, 1]), "t")
    lines = str(text).splitlines()
    assert "  2) x <= 0.5 2 low (low 0.600, mid 0.100, high 0.300) *" in lines
    assert "  3) x > 0.5 2 mid (low 0.050, mid 0.900, high 0.050) *" in lines
    assert text.value_kind == "probabilities"


def test_probit_bart_tree_leaves_are_latent_values_without_classes():
    arrays, binned, config = _one_split("probit", classes=("benign", "malignant"))
    text = format_tree(arrays, binned, ["x"], config, None, np.array([0, 1, 1, 1]), "t")
    body = str(text)
    assert "latent probit scale" in body and "P(malignant) = Phi(sum of the trees)" in body
    assert "  2) x <= 0.5 2 -0.25 *" in body.splitlines() and "1) root 4 -" in body.splitlines()
    # no class label names a node of a latent tree
    assert not any(label in line for line in text.lines for label in ("benign", "malignant"))
    assert text.value_kind == "latent probit"


def test_multinomial_bart_tree_names_its_class():
    arrays, binned, config = _one_split("multinomial", trees=2)
    text = format_tree(arrays, binned, ["x"], config, None, np.array([0, 2, 1, 1]), "t", tree=5)
    assert text.value_class == "high" and "log scale of class high" in text.header
    assert [n.yval for n in text.nodes] == ["-", "-0.25", "0.75"]
