"""Rule text of factor splits in the rpart-like tree listing."""

from bartpy_suite.posterior.tree_text import _levels_text


def test_factor_rule_lists_only_levels_present_at_the_node():
    # Levels A-D; only A and C reach the node. The mask's bits for the absent B and D are
    # arbitrary (drawn uniformly by the sampler), so printing them would misstate the rule.
    assert _levels_text(0b0011, ["A", "B", "C", "D"], {0, 2}) == ("{A}", "{C}")
    assert _levels_text(0b1100, ["A", "B", "C", "D"], {0, 1, 2, 3}) == ("{C,D}", "{A,B}")
