// CsvWriter: header and rows on disk after each row, quoting, append with a matching header,
// refusal of a different header, parent folders, no temp files left; RunInfo fields.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/context.h"
#include "core/error.h"
#include "testing.h"
#include "run/csv.h"
#include "run/run_info.h"

namespace pdnn {
namespace {

namespace fs = std::filesystem;

class Csv : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("pdnn_csv_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path dir_;
};

TEST_F(Csv, WritesHeaderAndEachRowAndCreatesFolders) {
  const fs::path p = dir_ / "a" / "b" / "out.csv";
  CsvWriter w(p.string(), {"x", "y"});
  // Nothing before the first row: a run that fails early leaves no header-only file and no
  // folders behind.
  EXPECT_FALSE(fs::exists(dir_ / "a"));
  EXPECT_EQ(w.row({"1", "2"}), 1u);
  EXPECT_EQ(slurp(p), "x,y\n1,2\n");
  EXPECT_EQ(w.row({"3", ""}), 2u);
  EXPECT_EQ(slurp(p), "x,y\n1,2\n3,\n");
  // Only out.csv in the folder: the temporary of each rewrite was renamed, not left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(p.parent_path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "out.csv");
  }
  EXPECT_EQ(files, 1);
}

TEST_F(Csv, QuotesFieldsThatNeedIt) {
  EXPECT_EQ(csv_escape("plain"), "plain");
  EXPECT_EQ(csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_escape("two\nlines"), "\"two\nlines\"");
  const fs::path p = dir_ / "q.csv";
  CsvWriter w(p.string(), {"name", "cpu"});
  w.row({"x", "AMD EPYC, 2 cores"});
  EXPECT_EQ(slurp(p), "name,cpu\nx,\"AMD EPYC, 2 cores\"\n");
}

TEST_F(Csv, RejectsWrongValueCount) {
  CsvWriter w((dir_ / "n.csv").string(), {"a", "b", "c"});
  EXPECT_THROW(w.row({"1", "2"}), Error);
  EXPECT_THROW(w.row({"1", "2", "3", "4"}), Error);
  EXPECT_FALSE(fs::exists(dir_ / "n.csv"));
}

// Several rows in one rewrite: all or none (a row of the wrong size writes nothing).
TEST_F(Csv, AddRowsWritesThemAllOrNone) {
  const fs::path p = dir_ / "many.csv";
  CsvWriter w(p.string(), {"a", "b"});
  EXPECT_EQ(w.add_rows({}), 0u);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_EQ(w.add_rows({{"1", "2"}, {"3", "x,y"}}), 2u);
  EXPECT_EQ(slurp(p), "a,b\n1,2\n3,\"x,y\"\n");
  EXPECT_THROW(w.add_rows({{"5", "6"}, {"7"}}), Error);
  EXPECT_EQ(w.add_rows({{"5", "6"}}), 3u);
  EXPECT_EQ(slurp(p), "a,b\n1,2\n3,\"x,y\"\n5,6\n");
}

TEST_F(Csv, AppendKeepsRowsWhenHeaderMatches) {
  const fs::path p = dir_ / "app.csv";
  {
    CsvWriter w(p.string(), {"k", "note"});
    w.row({"1", "multi\nline, quoted"});
  }
  {
    CsvWriter w(p.string(), {"k", "note"});
    EXPECT_EQ(slurp(p), "k,note\n1,\"multi\nline, quoted\"\n");  // opening alone changes nothing
    w.row({"2", "b"});
  }
  EXPECT_EQ(slurp(p), "k,note\n1,\"multi\nline, quoted\"\n2,b\n");
}

TEST_F(Csv, NoAppendStartsAfresh) {
  const fs::path p = dir_ / "fresh.csv";
  {
    CsvWriter w(p.string(), {"k"});
    w.row({"old"});
  }
  CsvWriter w(p.string(), {"k"}, /*append=*/false);
  EXPECT_EQ(slurp(p), "k\nold\n");  // replaced at the first row, not before
  w.row({"new"});
  EXPECT_EQ(slurp(p), "k\nnew\n");
}

TEST_F(Csv, DifferentHeaderThrowsNamingTheFile) {
  const fs::path p = dir_ / "h.csv";
  {
    CsvWriter w(p.string(), {"a", "b"});
    w.row({"1", "2"});
  }
  try {
    CsvWriter w(p.string(), {"a", "c"});
    FAIL() << "expected pdnn::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(p), "a,b\n1,2\n");  // the old file is untouched
}

TEST_F(Csv, RowsSplitBackAndDropRowsRewrites) {
  const fs::path p = dir_ / "r.csv";
  CsvWriter w(p.string(), {"k", "note"});
  EXPECT_TRUE(w.rows().empty());
  const std::vector<std::string> tricky = {"1", "a \"quoted\", multi\nline"};
  w.row(tricky);
  w.row({"2", ""});
  w.row({"3", "c"});
  const auto rows = w.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], tricky);
  EXPECT_EQ(rows[1], (std::vector<std::string>{"2", ""}));
  EXPECT_EQ(w.drop_rows([](size_t i, const std::vector<std::string>& f) {
    return i == 2 || f[0] == "2";
  }), 2u);
  EXPECT_EQ(w.rows(), (std::vector<std::vector<std::string>>{tricky}));
  EXPECT_EQ(w.drop_rows([](size_t, const std::vector<std::string>&) { return false; }), 0u);
}

// Two writers on one file (two runs appending to the same results): neither loses the other's
// rows, because each row re-reads the file.
TEST_F(Csv, RowsAppendedByAnotherWriterAreKept) {
  const fs::path p = dir_ / "shared.csv";
  CsvWriter a(p.string(), {"who"}), b(p.string(), {"who"});
  a.row({"a1"});
  b.row({"b1"});
  a.row({"a2"});
  EXPECT_EQ(slurp(p), "who\na1\nb1\na2\n");
}

TEST_F(Csv, RefusesAFifoOrAFolderWithoutOpeningIt) {
  fs::create_directories(dir_);
  const fs::path fifo = dir_ / "fifo.csv";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for reading would block until a writer came: it must be refused first.
  testing::expect_error_mentions([&] { CsvWriter w(fifo.string(), {"x"}); },
                                 {fifo.string(), "not a regular file"});
  testing::expect_error_mentions([&] { CsvWriter w(dir_.string(), {"x"}); },
                                 {dir_.string(), "not a regular file"});
}

TEST(CsvFmt, FixedDigits) {
  EXPECT_EQ(fmt(3.14159, 2), "3.14");
  EXPECT_EQ(fmt(2.0, 0), "2");
  EXPECT_EQ(fmt(-0.5, 3), "-0.500");
}

TEST(RunInfo, FieldsAreFilled) {
  Context ctx(2);
  const RunInfo r = run_info(ctx);
  EXPECT_EQ(r.threads, 2);
  EXPECT_FALSE(r.git_rev.empty());
  EXPECT_FALSE(r.host.empty());
  EXPECT_FALSE(r.cpu_model.empty());
  EXPECT_FALSE(r.blas_core.empty());
  EXPECT_FALSE(r.compiler.empty());
  // 2024-05-01T12:34:56Z
  ASSERT_EQ(r.timestamp.size(), 20u) << r.timestamp;
  EXPECT_EQ(r.timestamp[4], '-');
  EXPECT_EQ(r.timestamp[10], 'T');
  EXPECT_EQ(r.timestamp.back(), 'Z');
}

}  // namespace
}  // namespace pdnn
