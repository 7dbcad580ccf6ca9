"""Unit tests of the report: reading data files, checking targets, and the rendered document."""

import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from model import OURS, Figures, Target  # noqa: E402
from headline import headline  # noqa: E402
import render  # noqa: E402
from verdict import check  # noqa: E402

DATA = """# command: WQS_BENCH_RUNS=3 bench/informer
# runs: 3
# machine: test machine
# versions: test versions
sync\t10,000 objects\tworkqueue-sidecar\t1\t0.40
sync\t10,000 objects\tworkqueue-sidecar\t2\t0.50
sync\t10,000 objects\tworkqueue-sidecar\t3\t0.30
sync\t10,000 objects\tclient-go\t1\t0.31
sync\t10,000 objects\tclient-go\t2\t0.41
sync\t10,000 objects\tclient-go\t3\t0.21
warm\t10,000 objects\tworkqueue-sidecar\t1\t0.20
rss\tafter sync\tworkqueue-sidecar\t1\t35
rss\tafter sync\tclient-go\t1\t70
"""


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp())
        (self.dir / "informer.tsv").write_text(DATA)
        self.figures = Figures.read(self.dir / "informer.tsv")

    def test_reads_medians_and_meta(self):
        self.assertEqual(self.figures.median("sync", "10,000 objects", OURS), 0.40)
        self.assertEqual(self.figures.median("sync", "10,000 objects", "client-go"), 0.31)
        self.assertEqual(self.figures.meta["runs"], "3")

    def test_ratio_target_says_by_how_much_it_is_missed(self):
        target = Target("sync", "ratio_max", "sync", OURS, 1.0, "client-go")
        [verdict] = check(target, self.figures, "s")
        self.assertFalse(verdict.met)
        self.assertIn("MISSED by 29 %", verdict.margin)  # 0.40 / 0.31 = 1.29

    def test_a_ratio_may_read_the_other_side_from_another_metric(self):
        target = Target("sync", "ratio_max", "warm", OURS, 1.0, "client-go", b_metric="sync")
        [verdict] = check(target, self.figures, "s")  # 0.20 (warm) / 0.31 (sync)
        self.assertTrue(verdict.met)
        self.assertIn("workqueue-sidecar (warm) / client-go (sync) = 0.200 / 0.310", verdict.measured)

    def test_a_narrow_miss_never_reads_as_zero_percent(self):
        target = Target("sync", "ratio_max", "sync", OURS, 1.29, "client-go")
        [verdict] = check(target, self.figures, "s")  # 0.40 / 0.31 = 1.29032: 0.025 % over
        self.assertFalse(verdict.met)
        self.assertIn("MISSED by 0.03 %", verdict.margin)

    def test_met_targets(self):
        half = Target("rss", "ratio_max", "rss", OURS, 0.5, "client-go", variant="after sync")
        [verdict] = check(half, self.figures, "MiB")
        self.assertTrue(verdict.met)
        floor = Target("rss", "abs_min", "rss", OURS, 30, variant="after sync")
        self.assertTrue(check(floor, self.figures, "MiB")[0].met)

    def test_difference_target(self):
        target = Target("p99 added", "diff_max", "sync", OURS, 0.05, "client-go")
        [verdict] = check(target, self.figures, "s")
        self.assertFalse(verdict.met)
        self.assertIn("MISSED by 0.04", verdict.margin)  # 0.40 - 0.31 - 0.05

    def test_missing_figures_are_not_judged(self):
        target = Target("x", "abs_max", "nothing", OURS, 1.0)
        [verdict] = check(target, self.figures, "s")
        self.assertIsNone(verdict.met)

    def test_document_shows_missing_sections_and_the_why_of_a_miss(self):
        text = render.render(self.dir, None)
        self.assertIn("**Not measured yet**: run `bench/all --only remote`", text)
        self.assertIn("0.400 (0.300–0.500)", text)
        self.assertIn("Why the misses:", text)
        self.assertIn("Machine: test machine.", text)

    def test_headline_speaks_only_of_measured_sections(self):
        self.assertEqual(headline({}), [])
        self.assertEqual(headline({"informer": self.figures}), [], "no client-go-json figure: no informer line")
        (self.dir / "informer.tsv").write_text(DATA + "sync\t10,000 objects\tclient-go-json\t1\t1.20\n")
        [line] = headline({"informer": Figures.read(self.dir / "informer.tsv")})
        self.assertIn("0.500x client-go's memory", line)
        self.assertIn("0.333x that of client-go reading JSON", line)  # 0.40 / 1.20

    def test_a_section_without_ours_has_no_ratio_columns(self):
        rates = [("go", 30000), ("python", 4000), ("typescript", 8000), ("java", 5000), ("client-go", 2e6)]
        data = "".join(f"rate\tconcurrency 4\t{p}\t1\t{r}\n" for p, r in rates)
        (self.dir / "clients.tsv").write_text("# runs: 1\n" + data)
        [line] = headline({"clients": Figures.read(self.dir / "clients.tsv")})
        self.assertIn("Go 30,000/s, TypeScript 8,000/s, Java 5,000/s, Python 4,000/s", line)
        text = render.render(self.dir, None)
        self.assertIn("| figure | variant | unit | go | python | typescript | java | client-go |\n|---|", text)
        self.assertIn("python: **4,000 reconciles/s** (target ≥ 5,000 reconciles/s): **MISSED by 20.0 %**", text)

    def test_headline_compares_with_kopf_at_the_largest_size(self):
        lines = []
        for size, ours, kopf, event in (("5,000 objects", 2, 8, 4), ("10,000 objects", 4, 16, 8)):
            for metric in ("total", "cpu", "rss"):
                for program, value in ((OURS, ours), ("kopf", kopf), ("kopf-event", event)):
                    lines.append(f"{metric}\t{size}\t{program}\t1\t{value}\n")
        (self.dir / "kopf.tsv").write_text("# runs: 1\n" + "".join(lines))
        [line] = headline({"kopf": Figures.read(self.dir / "kopf.tsv")})
        self.assertIn("(no-op, 10,000 objects)", line)
        self.assertIn("0.250x kopf's time", line)
        self.assertIn("0.500x that of kopf's cheapest handler", line)
        self.assertIn("4.00 MiB against 16.0 MiB", line)

    def test_bad_line_names_file_and_line(self):
        (self.dir / "bad.tsv").write_text("# runs: 1\nsync\tonly three\tfields\n")
        with self.assertRaisesRegex(ValueError, "bad.tsv:2"):
            Figures.read(self.dir / "bad.tsv")


if __name__ == "__main__":
    unittest.main()
