"""Unit tests of the hot-code list's patterns and its staleness check.

Run: python3 hack/hot-code/test_hot_code.py (hack/test does).
"""

import unittest

from check_layout import unmatched
from write_script import exact_pattern, keeping_order, stable_pattern


class StablePatternTest(unittest.TestCase):
    def test_legacy_hash_becomes_a_wildcard(self):
        self.assertEqual(stable_pattern("_ZN4core3fmt5write17h0123456789abcdefE"), "_ZN4core3fmt5write17h*E")

    def test_v0_crate_disambiguators_become_wildcards(self):
        self.assertEqual(stable_pattern("_RNvNtCs1a2B_5alloc5boxed3new"), "_RNvNtCs*_5alloc5boxed3new")

    def test_llvm_copy_number_becomes_a_wildcard_in_both_forms(self):
        self.assertEqual(stable_pattern("_RNvNtCsXy_5alloc6string9write_str.5782"), "_RNvNtCs*_5alloc6string9write_str.*")
        self.assertEqual(stable_pattern("_ZN5bytes6static17h0123456789abcdefE.llvm.77"), "_ZN5bytes6static17h*E.*")

    def test_exact_pattern_keeps_the_hash_but_not_the_copy_number(self):
        self.assertEqual(exact_pattern("_ZN4http6as_str17hffd1a84579c295c8E.6923"), "_ZN4http6as_str17hffd1a84579c295c8E.*")
        self.assertEqual(exact_pattern("_ZN4http6as_str17hffd1a84579c295c8E"), "_ZN4http6as_str17hffd1a84579c295c8E")


class KeepingOrderTest(unittest.TestCase):
    def test_without_a_previous_list_the_order_is_first_run(self):
        self.assertEqual(keeping_order(["b", "a"], {}, []), ["b", "a"])

    def test_known_entries_keep_their_place_and_new_ones_follow_what_ran_before_them(self):
        previous = {"a": 0, "b": 1, "c": 2}
        # This profile saw c first, then a new x, then a, then b.
        self.assertEqual(keeping_order(["c", "x", "a", "b"], previous, []), ["a", "b", "c", "x"])

    def test_a_new_entry_that_ran_first_goes_first(self):
        self.assertEqual(keeping_order(["x", "a"], {"a": 0}, []), ["x", "a"])

    def test_entries_kept_from_the_previous_list_take_their_old_place(self):
        previous = {"a": 0, "b": 1, "c": 2}
        self.assertEqual(keeping_order(["a", "y", "c"], previous, ["b"]), ["a", "y", "b", "c"])


class UnmatchedTest(unittest.TestCase):
    SYMBOLS = ["_ZN1a3foo17h0000000000000001E", "_ZN1a3bar17h0000000000000002E.6923", "_RNvCsAb_1b3baz"]

    def test_every_entry_matching_leaves_nothing(self):
        listed = ["_ZN1a3foo17h0000000000000001E", "_ZN1a3bar17h*E.*", "_RNvCs*_1b3baz"]
        self.assertEqual(unmatched(listed, self.SYMBOLS), [])

    def test_an_exact_symbol_the_build_renamed_is_reported(self):
        self.assertEqual(unmatched(["_ZN1a3foo17h0000000000000009E"], self.SYMBOLS), ["_ZN1a3foo17h0000000000000009E"])

    def test_an_old_copy_number_is_reported(self):
        # What a list written before the copy-number wildcard held: the copy
        # is now .6923, the entry says .6922.
        self.assertEqual(unmatched(["_ZN1a3bar17h*E.6922"], self.SYMBOLS), ["_ZN1a3bar17h*E.6922"])

    def test_a_pattern_whose_prefix_sorts_past_every_symbol_is_reported(self):
        self.assertEqual(unmatched(["_ZZ*"], self.SYMBOLS), ["_ZZ*"])

    def test_a_pattern_is_matched_whole_not_by_prefix(self):
        self.assertEqual(unmatched(["_ZN1a3foo17h*"], self.SYMBOLS), [])
        self.assertEqual(unmatched(["_ZN1a3fo*X"], self.SYMBOLS), ["_ZN1a3fo*X"])


if __name__ == "__main__":
    unittest.main()
