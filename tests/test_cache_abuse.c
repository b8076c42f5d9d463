/* test_cache_abuse.c - the disk kernel cache against hostile or broken file systems: things
   that are not regular files where entries and the NVRTC memo live, damaged entries and
   memos, full disks, unusable directories, other users' files, killed writers. Each test
   checks the status, the warnings (counted through bq_set_warning_handler) and the cache
   counters. Criterion runs each test in its own process, so each starts with no NVRTC
   identity in memory and zeroed counters. Selects go through tests/fake_driver.c in its
   "gpu" mode (an sm_90 device) with the real NVRTC. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700 /* mknod */
#include <time.h>
#include <unistd.h>

/* The racers of writers_killed_at_random_on_a_cold_cache write entries in small pieces
   with a nap before each, so that a temporary file stays open long enough for a kill to
   land mid-write. The macro reaches only the header's own write() calls, in this file;
   every other test writes at full speed. */
static int slow_writes_;
static ssize_t bq_test_write(int fd, const void *p, size_t n) {
  if (!slow_writes_) return write(fd, p, n);
  struct timespec nap = {0, 500000L};
  nanosleep(&nap, NULL);
  return write(fd, p, n < 256 ? n : 256);
}
#define write bq_test_write

#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#define BQ_TEST_DIR_TEMPLATE "/tmp/bq_abuse_XXXXXX"
#define BQ_TEST_DIR_SIZE 3000
#include "host_util.h"

/* ---- counters ---------------------------------------------------------------------------- */
static void expect_stats(uint64_t disk_hits, uint64_t misses, uint64_t compiles, uint64_t corrupt,
                         uint64_t write_failures) {
  bq_cache_stats s = stats_();
  cr_assert(s.disk_hits == disk_hits && s.misses == misses && s.compiles == compiles &&
                s.corrupt == corrupt && s.write_failures == write_failures,
            "stats: disk_hits %llu misses %llu compiles %llu corrupt %llu write_failures %llu; expected "
            "%llu %llu %llu %llu %llu",
            (unsigned long long)s.disk_hits, (unsigned long long)s.misses, (unsigned long long)s.compiles,
            (unsigned long long)s.corrupt, (unsigned long long)s.write_failures, (unsigned long long)disk_hits,
            (unsigned long long)misses, (unsigned long long)compiles, (unsigned long long)corrupt,
            (unsigned long long)write_failures);
}

/* ---- descs, entries, files ---------------------------------------------------------------- */
/* the affine ops backward per tensor: one entry point (bq_affine), one module a kernel */
static bq_desc desc_(bq_op op) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.direction = op == BQ_DYNAMIC_QUANTIZE ? BQ_FORWARD : BQ_BACKWARD;
  d.float_type = BQ_F32;
  if (op == BQ_DYNAMIC_QUANTIZE) d.granularity = BQ_PER_TOKEN;
  return d;
}

static void warm_ok(bq_op op) {
  bq_desc d = desc_(op);
  bq_status st = bq_cache_warm(&d, 90);
  cr_assert_eq(st, BQ_SUCCESS, "bq_cache_warm: %s: %s", bq_status_name(st), bq_last_error());
}

/* where the entry of op on sm_90 lives in dir_: its one module's (loads the NVRTC identity) */
static void entry_path(bq_op op, char *path, size_t n) {
  bq__target t = {90, 0, 0, 1};
  bq_desc d = desc_(op);
  bq__kernel_src k;
  cr_assert_eq(bq__kernel_for(&d, &t, &k), BQ_SUCCESS);
  bq__str key;
  memset(&key, 0, sizeof key);
  cr_assert_eq(bq__full_key(&k, &key), BQ_SUCCESS);
  bq__entry_path(&k, &key, dir_, path, n);
  free(key.p);
  free(k.source.p);
}

/* where the NVRTC memo lives in dir_ (without loading the identity) */
static void memo_path(char *path, size_t n) { bq__memo_path(dir_, bq__nvrtc_lookup_key(), path, n); }

static int is_regular(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void fake_gpu(void) {
  setenv("BARACUDA_QUANT_DRIVER", fake_driver(), 1);
  setenv("FAKE_CUDA_MODE", "gpu", 1);
}

static bq_status select_(bq_op op, bq_plan **p) {
  bq_desc d = desc_(op);
  return bq_plan_select(&d, p);
}

/* warm_ok under a 60 s alarm: a warm that blocks in open() fails the test */
static void warm_ok_in_time(bq_op op) {
  alarm(60);
  warm_ok(op);
  alarm(0);
}

/* selects op, checks its SKU names a cubin for sm_90, destroys the plan */
static void select_ok(bq_op op) {
  bq_plan *p = NULL;
  bq_status st = select_(op, &p);
  cr_assert_eq(st, BQ_SUCCESS, "select: %s: %s", bq_status_name(st), bq_last_error());
  const char *sku = bq_plan_sku(p);
  cr_assert(strstr(sku, ".sm_90") && !strstr(sku, "compute_"), "SKU %s is not a cubin for sm_90", sku);
  bq_plan_destroy(p);
}

/* ---- things that are not regular files -------------------------------------------------- */
/* A regression would block in open(): alarm() turns that into a failing test. */
TestSuite(abuse, .timeout = 120);

Test(abuse, fifo_at_entry_path_warm) {
  fresh_dir();
  count_warnings();
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  cr_assert_eq(mkfifo(path, 0600), 0);
  warm_ok_in_time(BQ_QUANTIZE);
  expect_warnings(1, "FIFO");
  expect_stats(0, 1, 1, 1, 0);
  cr_assert(is_regular(path), "the FIFO was not replaced by an entry");
  warm_ok(BQ_QUANTIZE);
  expect_stats(1, 1, 1, 1, 0);
  expect_warnings(1, NULL);
}

static void *select_thread(void *arg) {
  bq_plan *p = NULL;
  bq_status st = select_(BQ_QUANTIZE, &p);
  bq_plan_destroy(p);
  *(bq_status *)arg = st;
  return NULL;
}

Test(abuse, fifo_at_entry_path_select_two_threads) {
  fresh_dir();
  fake_gpu();
  count_warnings();
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  cr_assert_eq(mkfifo(path, 0600), 0);
  alarm(60);
  bq_status st[2] = {BQ_ERROR_INVALID_ARGUMENT, BQ_ERROR_INVALID_ARGUMENT};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&th[i], NULL, select_thread, &st[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  alarm(0);
  cr_assert(st[0] == BQ_SUCCESS && st[1] == BQ_SUCCESS, "%s %s", bq_status_name(st[0]), bq_status_name(st[1]));
  expect_warnings(1, "FIFO");
  bq_cache_stats s = stats_();
  cr_assert_eq(s.misses + s.memory_hits, 2, "one build, one wait");
  cr_assert_eq(s.compiles, 1);
  cr_assert_eq(s.corrupt, 1);
  cr_assert(is_regular(path));
}

Test(abuse, fifo_at_memo_path) {
  fresh_dir();
  count_warnings();
  char memo[4096];
  memo_path(memo, sizeof memo);
  cr_assert_eq(mkfifo(memo, 0600), 0);
  warm_ok_in_time(BQ_QUANTIZE);
  expect_warnings(1, "FIFO");
  cr_assert(strstr(warning_[0], "memo"), "%s", warning_[0]);
  expect_stats(0, 1, 1, 0, 0);
  cr_assert(is_regular(memo), "the memo was not rewritten over the FIFO");
  bq__nvrtc_id id;
  size_t n = 0;
  char *text = (char *)read_all(memo, &n);
  cr_assert_null(bq__memo_parse(text, n, &id), "rewritten memo does not parse");
  free(text);
}

/* An empty directory at an entry's path is debris (the library writes none): the write
   removes it and puts the entry there, so the next process hits rather than recompiling
   and warning at every start. */
Test(abuse, directory_at_entry_path) {
  fresh_dir();
  count_warnings();
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  cr_assert_eq(mkdir(path, 0700), 0);
  warm_ok(BQ_QUANTIZE);
  expect_warnings(1, "is a directory");
  cr_assert(!strstr(warning_[0], "not writable"), "%s", warning_[0]);
  expect_stats(0, 1, 1, 1, 0);
  cr_assert(is_regular(path), "the entry replaced the empty directory");
  warm_ok(BQ_QUANTIZE);
  expect_warnings(1, NULL);
  expect_stats(1, 1, 1, 1, 0);
}

/* A directory with files at an entry's path is not the library's to remove: the kernel is
   compiled and kept in memory, with one warning naming the directory, and nothing else in
   the directory is affected. */
Test(abuse, directory_with_files_at_entry_path) {
  fresh_dir();
  count_warnings();
  char path[4096], inner[4200];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  cr_assert_eq(mkdir(path, 0700), 0);
  snprintf(inner, sizeof inner, "%s/keep", path);
  write_all(inner, "mine", 4);
  warm_ok(BQ_QUANTIZE);
  expect_warnings(1, "is a directory");
  expect_stats(0, 1, 1, 1, 1);
  warm_ok(BQ_QUANTIZE);
  expect_warnings(1, NULL); /* the same cause: no second warning */
  expect_stats(0, 2, 2, 2, 2);
  cr_assert_eq(access(inner, F_OK), 0, "the directory's file is untouched");
  warm_ok(BQ_DEQUANTIZE); /* other entries in the directory are cached as ever */
  warm_ok(BQ_DEQUANTIZE);
  expect_stats(1, 3, 3, 2, 2);
  expect_warnings(1, NULL);
}

Test(abuse, symlink_at_entry_path_is_not_written_through) {
  fresh_dir();
  count_warnings();
  char outside[4096], path[4096];
  snprintf(outside, sizeof outside, "%s.outside", dir_);
  write_all(outside, "precious", 8);
  struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  cr_assert_eq(utimensat(AT_FDCWD, outside, old, 0), 0);
  entry_path(BQ_QUANTIZE, path, sizeof path);
  cr_assert_eq(symlink(outside, path), 0);
  warm_ok(BQ_QUANTIZE);
  expect_warnings(1, "symbolic link");
  expect_stats(0, 1, 1, 1, 0);
  size_t n = 0;
  unsigned char *got = read_all(outside, &n);
  cr_assert(n == 8 && !memcmp(got, "precious", 8), "the link's target was written through");
  struct stat st;
  cr_assert_eq(stat(outside, &st), 0);
  cr_assert_eq(st.st_mtime, 1000000000, "the link's target was touched");
  cr_assert(is_regular(path), "the link was not replaced by an entry");
  warm_ok(BQ_QUANTIZE);
  expect_stats(1, 1, 1, 1, 0);
  free(got);
  unlink(outside);
}

Test(abuse, symlink_to_a_device_at_entry_path) {
  fresh_dir();
  count_warnings();
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  cr_assert_eq(symlink("/dev/zero", path), 0);
  warm_ok_in_time(BQ_QUANTIZE);
  expect_warnings(1, "symbolic link");
  expect_stats(0, 1, 1, 1, 0);
  cr_assert(is_regular(path));
}

Test(abuse, device_node_at_entry_path) {
  fresh_dir();
  count_warnings();
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  /* the node of /dev/zero, made in place: needs CAP_MKNOD (root outside a restricted container) */
  struct stat zero;
  cr_assert_eq(stat("/dev/zero", &zero), 0);
  if (mknod(path, S_IFCHR | 0600, zero.st_rdev) != 0)
    cr_skip_test("mknod: %s (a device node at an entry path needs CAP_MKNOD)", strerror(errno));
  warm_ok_in_time(BQ_QUANTIZE);
  expect_warnings(1, "device");
  expect_stats(0, 1, 1, 1, 0);
  cr_assert(is_regular(path), "the device node was not replaced by an entry");
}

Test(abuse, socket_at_entry_path) {
  fresh_dir();
  count_warnings();
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  cr_assert(s >= 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  /* sun_path is short: bind through a short relative name */
  char cwd[4096];
  cr_assert_not_null(getcwd(cwd, sizeof cwd));
  cr_assert_eq(chdir(dir_), 0);
  snprintf(a.sun_path, sizeof a.sun_path, "%s", strrchr(path, '/') + 1);
  int bound = bind(s, (struct sockaddr *)&a, sizeof a);
  cr_assert_eq(chdir(cwd), 0);
  if (bound != 0 && errno == ENAMETOOLONG) cr_skip_test("entry name longer than sun_path");
  cr_assert_eq(bound, 0, "bind: %s", strerror(errno));
  warm_ok_in_time(BQ_QUANTIZE);
  close(s);
  expect_warnings(1, "socket");
  expect_stats(0, 1, 1, 1, 0);
  cr_assert(is_regular(path));
}

/* ---- damaged entries ------------------------------------------------------------------------ */
/* Each damage in turn, on a fresh valid entry: a miss that recompiles the same bytes and
   rewrites them, then a hit. Corrupt entries are told once per process. */
Test(abuse, damaged_entries_are_misses_and_rewritten) {
  fresh_dir();
  count_warnings();
  warm_ok(BQ_QUANTIZE);
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  size_t n = 0;
  unsigned char *orig = read_all(path, &n);
  uint32_t klen = bq__get_u32(orig + 12);
  size_t flips[] = {0, 7, 8, 12, 15, 16, 23, 24, 31, 32, 32 + klen / 2, 32 + (size_t)klen - 1, 32 + (size_t)klen,
                    n - 1};
  size_t cuts[] = {0, 1, 31, 32, 33, 32 + (size_t)klen - 1, 32 + (size_t)klen, n - 1};
  uint64_t lengths[] = {0, 1, n, (uint64_t)1 << 62, UINT64_MAX, BQ__CACHE_MAX_PAYLOAD + 1ull};
  uint32_t key_lengths[] = {0, klen - 1, klen + 1, UINT32_MAX};
  int cases = 0;
  unsigned char *buf = malloc(n + 16);
  for (int kind = 0; kind < 5; kind++) {
    int count = kind == 0 ? (int)(sizeof flips / sizeof flips[0]) : kind == 1 ? (int)(sizeof cuts / sizeof cuts[0])
              : kind == 2 ? (int)(sizeof lengths / sizeof lengths[0]) : kind == 3 ? 4 : 1;
    for (int i = 0; i < count; i++) {
      memcpy(buf, orig, n);
      size_t len = n;
      if (kind == 0) buf[flips[i]] ^= 0x10;
      if (kind == 1) len = cuts[i];
      if (kind == 2) bq__put_u64(buf + 16, lengths[i]);
      if (kind == 3) bq__put_u32(buf + 12, key_lengths[i]);
      if (kind == 4) memcpy(buf + n, "appended", 8), len = n + 8;
      write_all(path, buf, len);
      bq_cache_stats before = stats_();
      warm_ok(BQ_QUANTIZE);
      bq_cache_stats after = stats_();
      cr_assert_eq(after.corrupt, before.corrupt + 1, "damage %d/%d not detected", kind, i);
      cr_assert_eq(after.compiles, before.compiles + 1, "damage %d/%d not recompiled", kind, i);
      cr_assert_eq(after.misses, before.misses + 1);
      size_t n2 = 0;
      unsigned char *again = read_all(path, &n2);
      cr_assert(n2 == n && !memcmp(again, orig, n), "damage %d/%d: the rewritten entry differs", kind, i);
      free(again);
      warm_ok(BQ_QUANTIZE);
      cr_assert_eq(stats_().disk_hits, after.disk_hits + 1, "damage %d/%d: rewritten entry is not a hit", kind, i);
      cases++;
    }
  }
  cr_assert_eq(cases, 14 + 8 + 6 + 4 + 1);
  expect_warnings(1, "corrupt");
  bq_cache_stats s = stats_();
  cr_assert_eq(s.corrupt, (uint64_t)cases);
  cr_assert_eq(s.write_failures, 0);
  free(buf);
  free(orig);
}

/* ---- the NVRTC memo ------------------------------------------------------------------------ */
/* NVRTC's own identity and archs, as the memo should say them */
static void true_id(bq__nvrtc_id *id) {
  const bq__nvrtc_api *nv = bq__nvrtc_get();
  cr_assert_not_null(nv, "NVRTC: %s", bq_last_error());
  bq__id_from_nvrtc(nv, id);
}

/* a memo's text for id's identity and the given arch list, checksummed (if sum) */
static size_t memo_text(const bq__nvrtc_id *id, const char *archs, int sum, char *out, size_t cap) {
  int n = snprintf(out, cap, "%sidentity %s\narchs%s\n", BQ__MEMO_MAGIC, id->identity, archs);
  if (sum) n += snprintf(out + n, cap - (size_t)n, "checksum %016llx\n",
                         (unsigned long long)bq__fnv1a(out, (size_t)n, BQ__FNV_SEED));
  return (size_t)n;
}

static void archs_of(const bq__nvrtc_id *id, int skip_from, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (int i = 0; i < id->num_archs; i++)
    if (id->archs[i] < skip_from) n += (size_t)snprintf(out + n, cap - n, " %d", id->archs[i]);
}

/* Puts text at the memo path, then selects on the fake sm_90 device: the select must get
   an sm_90 cubin, the memo must end up NVRTC's own, with `warned` warnings naming needle. */
static void memo_case(const char *text, size_t n, int warned, const char *needle) {
  fake_gpu();
  count_warnings();
  char memo[4096];
  memo_path(memo, sizeof memo);
  write_all(memo, text, n);
  select_ok(BQ_QUANTIZE);
  expect_warnings(warned, needle);
  bq_cache_stats s = stats_();
  cr_assert_eq(s.misses, 1);
  cr_assert(s.compiles >= 1 && s.compiles <= 2, "compiles %llu", (unsigned long long)s.compiles);
  cr_assert_eq(s.corrupt, 0);
  cr_assert_eq(s.write_failures, 0);
  bq__nvrtc_id want, got;
  true_id(&want);
  size_t m = 0;
  char *back = (char *)read_all(memo, &m);
  cr_assert_null(bq__memo_parse(back, m, &got), "memo not rewritten: %s", back);
  cr_assert(got.num_archs == want.num_archs && !memcmp(got.archs, want.archs, sizeof(int) * (size_t)want.num_archs),
            "rewritten memo has the wrong archs: %s", back);
  free(back);
  /* and a second select is a memory hit, a third process would read the memo as is */
  select_ok(BQ_QUANTIZE);
  cr_assert_eq(stats_().memory_hits, 1);
}

/* memo_case, in a fresh directory, of a checksummed memo of NVRTC's identity listing archs:
   one warning, naming needle */
static void memo_archs_case(const char *archs, const char *needle) {
  fresh_dir();
  bq__nvrtc_id id;
  true_id(&id);
  char text[2048];
  size_t n = memo_text(&id, archs, 1, text, sizeof text);
  memo_case(text, n, 1, needle);
}

Test(abuse, memo_with_a_flipped_arch_byte) {
  fresh_dir();
  bq__nvrtc_id id;
  true_id(&id);
  char archs[512], text[2048];
  archs_of(&id, 1000, archs, sizeof archs);
  size_t n = memo_text(&id, archs, 1, text, sizeof text);
  char *a = strstr(text, "archs ") + 6;
  *a ^= 0x01; /* a digit becomes another digit: only the checksum tells */
  memo_case(text, n, 1, "checksum mismatch");
}

Test(abuse, memo_truncated) {
  fresh_dir();
  bq__nvrtc_id id;
  true_id(&id);
  char archs[512], text[2048];
  archs_of(&id, 1000, archs, sizeof archs);
  size_t n = memo_text(&id, archs, 1, text, sizeof text);
  char *cut = strstr(text, " 90") + 1; /* the list ends before sm_90: compute_8x PTX if trusted */
  memo_case(text, (size_t)(cut - text), 1, "no checksum");
  (void)n;
}

Test(abuse, memo_truncated_list_with_a_valid_checksum) {
  /* a list that lacks sm_90 yet reads back sane: found wrong against NVRTC at the compile,
     and the select chooses again */
  fresh_dir();
  bq__nvrtc_id id;
  true_id(&id);
  char archs[512], text[2048];
  archs_of(&id, 90, archs, sizeof archs);
  size_t n = memo_text(&id, archs, 1, text, sizeof text);
  memo_case(text, n, 1, "disagrees");
}

Test(abuse, memo_listing_only_newer_archs) {
  /* every compile would fail ("older than every arch") while the memo is trusted */
  memo_archs_case(" 100 120", "disagrees");
}

Test(abuse, memo_unsorted) {
  memo_archs_case(" 90 80 100", "not ascending");
}

Test(abuse, memo_garbage_archs) {
  memo_archs_case(" 9x0 abc", "not numbers");
}

Test(abuse, memo_arch_out_of_range_and_empty) {
  memo_archs_case(" 5 90", "out of range");
}

Test(abuse, memo_empty_arch_list) {
  memo_archs_case("", "no archs");
}

Test(abuse, memo_garbage_identity) {
  fresh_dir();
  bq__nvrtc_id id;
  true_id(&id);
  strcpy(id.identity, "nvrtc \001\002 size 1 mtime 1");
  char text[2048];
  size_t n = memo_text(&id, " 90", 1, text, sizeof text);
  memo_case(text, n, 1, "identity");
}

Test(abuse, memo_random_bytes) {
  fresh_dir();
  char text[700];
  for (size_t i = 0; i < sizeof text; i++) text[i] = (char)(i * 2654435761u >> 11);
  memo_case(text, sizeof text, 1, "memo");
}

Test(abuse, memo_of_the_older_layout_is_replaced_silently) {
  fresh_dir();
  bq__nvrtc_id id;
  true_id(&id);
  char text[2048];
  int n = snprintf(text, sizeof text, "identity %s\narchs 90\n", id.identity);
  memo_case(text, (size_t)n, 0, NULL);
}

/* ---- full disks, unusable directories, HOME ----------------------------------------------- */
Test(abuse, disk_full) {
  fresh_dir();
  count_warnings();
  /* files past 4 KiB fail with EFBIG (SIGXFSZ ignored): entries do not fit, the memo does */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit r = {4096, 4096};
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &r), 0);
  warm_ok(BQ_QUANTIZE);
  warm_ok(BQ_DEQUANTIZE);
  expect_warnings(1, strerror(EFBIG));
  cr_assert(strstr(warning_[0], "cannot write"), "%s", warning_[0]);
  expect_stats(0, 2, 2, 0, 2);
  cr_assert_eq(count_files(dir_, ".bqk"), 0);
  cr_assert_eq(count_files(dir_, ".tmp."), 0, "a failed write left its temporary file");
}

/* runs fn in a child that dropped root for uid (with gid) when root; returns its exit code */
static int as_user(uid_t uid, int (*fn)(void)) {
  pid_t kid = fork();
  cr_assert_neq(kid, -1);
  if (kid == 0) {
    if (geteuid() == 0 && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(90);
    alarm(60);
    _exit(fn());
  }
  int status = 0;
  waitpid(kid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static int warm_in_read_only_dir(void) {
  count_warnings();
  bq_desc d = desc_(BQ_QUANTIZE);
  if (bq_cache_warm(&d, 90) != BQ_SUCCESS) return 1;
  d.op = BQ_DEQUANTIZE;
  if (bq_cache_warm(&d, 90) != BQ_SUCCESS) return 2;
  if (warnings_ != 1) return 3;
  if (!strstr(warning_[0], "is not writable")) return 4;
  bq_cache_stats s = stats_();
  if (s.write_failures != 2 || s.compiles != 2 || s.misses != 2) return 5;
  return 0;
}

Test(abuse, read_only_directory) {
  /* root ignores a directory's mode: as root the warm runs in a child that became an
     unprivileged user (65534) first, so the 0500 directory does refuse it */
  fresh_dir();
  cr_assert_eq(chmod(dir_, 0500), 0);
  if (geteuid() == 0) cr_assert_eq(chown(dir_, 65534, 65534), 0);
  int code = as_user(65534, warm_in_read_only_dir);
  cr_assert_eq(code, 0, "child failed with %d", code);
  cr_assert_eq(count_files(dir_, ".bqk"), 0);
  expect_stats(0, 0, 0, 0, 0); /* nothing happened in this process */
}

/* A read-only cache warmed under another NVRTC lookup path (LD_LIBRARY_PATH differs, so
   its memo is keyed for another loader): the entry is read from disk and nothing warns,
   although this process's memo cannot be written. */
static int hit_in_read_only_dir_without_memo(void) {
  count_warnings();
  bq_desc d = desc_(BQ_QUANTIZE);
  const bq_cache_stats s0 = stats_(); /* (the parent's warm, counted before the fork) */
  if (bq_cache_warm(&d, 90) != BQ_SUCCESS) return 1;
  bq_cache_stats s = stats_();
  if (s.disk_hits != s0.disk_hits + 1 || s.compiles != s0.compiles) return 2;
  if (warnings_ != 0) {
    fprintf(stderr, "warned: %s\n", warning_[0]);
    return 3;
  }
  char memo[4096];
  memo_path(memo, sizeof memo);
  if (access(memo, F_OK) == 0) return 4;
  return 0;
}
Test(abuse, read_only_directory_hit_with_a_memo_of_another_loader_path) {
  fresh_dir();
  warm_ok(BQ_QUANTIZE);
  const char *old = getenv("LD_LIBRARY_PATH");
  char path[8192];
  snprintf(path, sizeof path, "%s%s/nonexistent-lib-dir", old ? old : "", old && *old ? ":" : "");
  setenv("LD_LIBRARY_PATH", path, 1); /* another lookup key: this process's memo is absent */
  cr_assert_eq(chmod(dir_, 0555), 0);
  if (geteuid() == 0) cr_assert_eq(chown(dir_, 65534, 65534), 0);
  int code = as_user(65534, hit_in_read_only_dir_without_memo);
  cr_assert_eq(code, 0, "child failed with %d", code);
}

Test(abuse, file_where_the_directory_should_be) {
  fresh_dir();
  count_warnings();
  char blocker[4096];
  snprintf(blocker, sizeof blocker, "%s/cache", dir_);
  write_all(blocker, "x", 1);
  setenv("BARACUDA_QUANT_CACHE_DIR", blocker, 1);
  warm_ok(BQ_QUANTIZE);
  warm_ok(BQ_DEQUANTIZE);
  expect_warnings(1, "cannot be created");
  cr_assert(strstr(warning_[0], strerror(ENOTDIR)) && !strstr(warning_[0], "not writable"), "%s", warning_[0]);
  expect_stats(0, 2, 2, 0, 2);
}

Test(abuse, home_unset_falls_back_to_the_user_database) {
  unsetenv("BARACUDA_QUANT_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  count_warnings();
  struct passwd *pw = getpwuid(geteuid());
  cr_assert(pw && pw->pw_dir && pw->pw_dir[0] == '/', "this user has no home directory in the database");
  char want[4096];
  snprintf(want, sizeof want, "%s/.cache/baracuda_quant", pw->pw_dir);
  const char *got = bq_cache_directory();
  cr_assert_not_null(got);
  cr_assert_str_eq(got, want);
  cr_assert_str_eq(bq_cache_directory(), want);
  expect_warnings(1, "HOME is not set");
  cr_assert(strstr(warning_[0], want), "%s", warning_[0]);
  expect_stats(0, 0, 0, 0, 0);
}

static int no_home_anywhere(void) {
  count_warnings();
  unsetenv("BARACUDA_QUANT_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  if (bq_cache_directory() != NULL) return 1;
  bq_desc d = desc_(BQ_QUANTIZE);
  if (bq_cache_warm(&d, 90) != BQ_SUCCESS) return 2;
  if (bq_cache_warm(&d, 90) != BQ_SUCCESS) return 3;
  if (warnings_ != 1 || !strstr(warning_[0], "memory only")) return 4;
  bq_cache_stats s = stats_();
  if (s.compiles != 2 || s.misses != 2 || s.write_failures != 0 || s.disk_hits != 0) return 5;
  return 0;
}

Test(abuse, no_home_at_all_is_memory_only) {
  /* a uid the user database does not know */
  if (geteuid() != 0) cr_skip_test("needs root to become a uid without a passwd entry");
  cr_assert_null(getpwuid(54321), "uid 54321 exists here");
  int code = as_user(54321, no_home_anywhere);
  cr_assert_eq(code, 0, "child failed with %d", code);
  expect_stats(0, 0, 0, 0, 0);
}

Test(abuse, too_long_path_is_memory_only_with_one_warning) {
  count_warnings();
  char longdir[4000] = "/tmp/bq_abuse_long";
  size_t n = strlen(longdir);
  while (n < BQ__DIR_MAX + 10) n += (size_t)snprintf(longdir + n, sizeof longdir - n, "/abcdefghij");
  setenv("BARACUDA_QUANT_CACHE_DIR", longdir, 1);
  cr_assert_null(bq_cache_directory());
  warm_ok(BQ_QUANTIZE);
  warm_ok(BQ_QUANTIZE);
  expect_warnings(1, "too long");
  cr_assert(strstr(warning_[0], "memory only"), "%s", warning_[0]);
  expect_stats(0, 2, 2, 0, 0);
}

Test(abuse, alternating_directories_warn_once_each) {
  count_warnings();
  char a[4096], b[4096];
  fresh_dir();
  snprintf(a, sizeof a, "%s/file/cache", dir_);
  snprintf(b, sizeof b, "%s/file", dir_);
  write_all(b, "x", 1);
  fresh_dir();
  snprintf(b, sizeof b, "%s/file/cache", dir_);
  char f[4096];
  snprintf(f, sizeof f, "%s/file", dir_);
  write_all(f, "x", 1);
  for (int i = 0; i < 6; i++) {
    setenv("BARACUDA_QUANT_CACHE_DIR", i % 2 ? b : a, 1);
    warm_ok(BQ_QUANTIZE);
  }
  cr_assert_eq(warnings_, 2, "expected one warning per directory, got %d", warnings_);
  cr_assert(strstr(warning_[0], a) && strstr(warning_[1], b), "%s | %s", warning_[0], warning_[1]);
  expect_stats(0, 6, 6, 0, 6);
}

/* ---- other users ----------------------------------------------------------------------------- */
/* In a fresh directory of the given mode, warms an entry, gives it (at path) to user 12345,
   and warms again, counting warnings. Needs root. */
static void warm_a_foreign_entry(mode_t mode, char *path, size_t n) {
  fresh_dir();
  count_warnings();
  cr_assert_eq(chmod(dir_, mode), 0);
  warm_ok(BQ_QUANTIZE);
  entry_path(BQ_QUANTIZE, path, n);
  cr_assert_eq(chown(path, 12345, 12345), 0);
  warm_ok(BQ_QUANTIZE);
}

Test(abuse, foreign_entry_in_a_group_writable_directory_is_refused) {
  if (geteuid() != 0) cr_skip_test("needs root to give an entry to another user");
  char path[4096];
  warm_a_foreign_entry(0770, path, sizeof path);
  expect_warnings(1, "another user");
  expect_stats(0, 2, 2, 1, 0);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_assert_eq(st.st_uid, geteuid(), "the foreign entry was not replaced by this user's");
  warm_ok(BQ_QUANTIZE);
  expect_stats(1, 2, 2, 1, 0);
  expect_warnings(1, NULL);
}

Test(abuse, foreign_entry_in_a_private_directory_is_read) {
  if (geteuid() != 0) cr_skip_test("needs root to give an entry to another user");
  char path[4096];
  warm_a_foreign_entry(0755, path, sizeof path);
  expect_warnings(0, NULL);
  expect_stats(1, 1, 1, 0, 0);
}

Test(abuse, foreign_memo_in_a_world_writable_directory_is_refused) {
  if (geteuid() != 0) cr_skip_test("needs root to give the memo to another user");
  fresh_dir();
  count_warnings();
  cr_assert_eq(chmod(dir_, 01777), 0); /* sticky like /tmp: still anyone's to plant files in */
  bq__nvrtc_id id;
  true_id(&id);
  char archs[512], text[2048], memo[4096];
  archs_of(&id, 1000, archs, sizeof archs);
  size_t n = memo_text(&id, archs, 1, text, sizeof text);
  memo_path(memo, sizeof memo);
  write_all(memo, text, n);
  cr_assert_eq(chown(memo, 12345, 12345), 0);
  warm_ok(BQ_QUANTIZE);
  expect_warnings(1, "another user");
  cr_assert(strstr(warning_[0], "memo"), "%s", warning_[0]);
  expect_stats(0, 1, 1, 0, 0);
  struct stat st;
  cr_assert_eq(stat(memo, &st), 0);
  cr_assert_eq(st.st_uid, geteuid(), "the memo was not rewritten by this user");
}

Test(abuse, default_directory_is_created_private) {
  char home[64];
  snprintf(home, sizeof home, "/tmp/bq_abuse_home_XXXXXX");
  cr_assert_not_null(mkdtemp(home));
  made_dir(home);
  unsetenv("BARACUDA_QUANT_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", home, 1);
  count_warnings();
  warm_ok(BQ_QUANTIZE);
  char p[128];
  struct stat st;
  snprintf(p, sizeof p, "%s/.cache", home);
  cr_assert_eq(stat(p, &st), 0);
  cr_assert_eq(st.st_mode & 07777, 0700, "%s has mode %o", p, st.st_mode & 07777);
  snprintf(p, sizeof p, "%s/.cache/baracuda_quant", home);
  cr_assert_eq(stat(p, &st), 0);
  cr_assert_eq(st.st_mode & 07777, 0700, "%s has mode %o", p, st.st_mode & 07777);
  snprintf(dir_, sizeof dir_, "%s", p);
  cr_assert_eq(count_files(dir_, ".bqk"), 1);
  expect_warnings(0, NULL);
  expect_stats(0, 1, 1, 0, 0);
}

/* ---- killed writers' temporary files ------------------------------------------------------- */
static void make_file(const char *name, time_t mtime, uid_t uid) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir_, name);
  write_all(p, "partial", 7);
  struct timespec t[2] = {{mtime, 0}, {mtime, 0}};
  cr_assert_eq(utimensat(AT_FDCWD, p, t, 0), 0);
  if (uid != geteuid()) cr_assert_eq(chown(p, uid, uid), 0);
}

static int exists(const char *name) {
  char p[4096];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir_, name);
  return lstat(p, &st) == 0;
}

Test(abuse, old_temporary_files_are_swept) {
  fresh_dir();
  count_warnings();
  time_t now = time(NULL);
  uid_t me = geteuid();
  make_file("a-0123456789abcdef.bqk.tmp.123.4.7ffd1234.65f0a0b1", now - 3600, me);    /* swept */
  make_file("nvrtc-0123456789abcdef.id.tmp.99.1.7ffd1234.65f0a0b1", now - 700, me);  /* swept */
  make_file("b-0123456789abcdef.bqk.tmp.124.5.7ffd1234.65f0a0b1", now - 60, me);     /* young */
  make_file("c-0123456789abcdef.bqk.tmp.x.5.7ffd1234.65f0a0b1", now - 3600, me);     /* not ours */
  make_file("notes.tmp.1.2.a.b", now - 3600, me);                                    /* not ours */
  make_file("d-0123456789abcdef.bqk.tmp.125.6.7ffd1234.65f0a0b1", now - 3600,
            me == 0 ? 12345 : me);                                                   /* another's */
  warm_ok(BQ_QUANTIZE);
  cr_assert(!exists("a-0123456789abcdef.bqk.tmp.123.4.7ffd1234.65f0a0b1"), "old temporary entry kept");
  cr_assert(!exists("nvrtc-0123456789abcdef.id.tmp.99.1.7ffd1234.65f0a0b1"), "old temporary memo kept");
  cr_assert(exists("b-0123456789abcdef.bqk.tmp.124.5.7ffd1234.65f0a0b1"), "a young temporary file was removed");
  cr_assert(exists("c-0123456789abcdef.bqk.tmp.x.5.7ffd1234.65f0a0b1"), "a file of another name was removed");
  cr_assert(exists("notes.tmp.1.2.a.b"), "a file of another name was removed");
  if (me == 0) cr_assert(exists("d-0123456789abcdef.bqk.tmp.125.6.7ffd1234.65f0a0b1"), "another user's file was removed");
  expect_warnings(0, NULL);
  expect_stats(0, 1, 1, 0, 0);
}

/* ---- entries the driver refuses ------------------------------------------------------------- */
Test(abuse, entry_refused_by_the_driver_is_rewritten) {
  fresh_dir();
  fake_gpu();
  count_warnings();
  warm_ok(BQ_QUANTIZE);
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  struct stat before, after;
  cr_assert_eq(stat(path, &before), 0);
  setenv("FAKE_CUDA_REFUSE", "1", 1); /* the driver refuses the first image it sees */
  select_ok(BQ_QUANTIZE);
  expect_warnings(1, "refused");
  cr_assert(!strstr(warning_[0], "corrupt"), "%s", warning_[0]);
  expect_stats(0, 2, 2, 1, 0);
  cr_assert_eq(stat(path, &after), 0);
  cr_assert_neq(after.st_ino, before.st_ino, "the refused entry was not rewritten");
  bq_cache_clear_memory();
  select_ok(BQ_QUANTIZE); /* the rewritten entry loads */
  expect_stats(1, 2, 2, 1, 0);
  expect_warnings(1, NULL);
}

Test(abuse, driver_refusing_every_image) {
  fresh_dir();
  fake_gpu();
  count_warnings();
  warm_ok(BQ_QUANTIZE);
  char path[4096];
  entry_path(BQ_QUANTIZE, path, sizeof path);
  struct stat before, after;
  cr_assert_eq(stat(path, &before), 0);
  setenv("FAKE_CUDA_REFUSE", "1000", 1);
  bq_plan *p = NULL;
  bq_status st = select_(BQ_QUANTIZE, &p);
  cr_assert_eq(st, BQ_ERROR_CUDA, "%s: %s", bq_status_name(st), bq_last_error());
  cr_assert_null(p);
  cr_assert(strstr(bq_last_error(), "freshly compiled") && strstr(bq_last_error(), "refused too"), "%s",
            bq_last_error());
  cr_assert(!strstr(bq_last_error(), "corrupt"), "%s", bq_last_error());
  expect_warnings(0, NULL); /* the error says it all; nothing blames the cache */
  bq_cache_stats s = stats_();
  cr_assert_eq(s.corrupt, 1);
  cr_assert_eq(s.write_failures, 0);
  cr_assert_eq(stat(path, &after), 0);
  cr_assert_eq(after.st_ino, before.st_ino, "an image the driver refused was written");
}

/* ---- writers killed at random moments on a cold cache --------------------------------------- */
static const bq_op race_ops[] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE};
#define RACE_OPS 4

/* a racer: warms, and rewrites entries whether or not they are there, forever */
static void racer(unsigned seed) {
  slow_writes_ = 1;
  for (unsigned i = 0;; i++) {
    bq_desc d = desc_(race_ops[(seed + i * 7u) % RACE_OPS]);
    if (i % 2 == 0) {
      bq_cache_warm(&d, 90);
    } else {
      bq__target t = {90, 0, 0, 1}; /* (entry point 0's module: bq_affine's, bq_dynamic's) */
      bq__kernel_src k;
      void *bin = NULL;
      size_t len = 0;
      int from_disk = 0;
      if (!bq__kernel_for(&d, &t, &k)) bq__obtain(&k, BQ__WRITE, &bin, &len, &from_disk);
      free(bin);
      free(k.source.p);
    }
  }
}

/* whether pid has one of the cache's temporary files open (Linux's /proc) */
static int writing(pid_t pid) {
  char fds[64], link[400], target[4096];
  snprintf(fds, sizeof fds, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(fds);
  struct dirent *e;
  int found = 0;
  while (d && !found && (e = readdir(d))) {
    snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) target[n] = 0, found = strstr(target, dir_) && strstr(target, ".tmp.");
  }
  if (d) closedir(d);
  return found;
}

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The kill schedule runs on the clock, not on counted naps: on a loaded machine a 1 ms nap
   can take ten times that, and a count of naps then stretches the race past any bound. The
   race stops after KILLS kills or WINDOW seconds, whichever comes first; a hang is the
   suite's timeout to catch. */
Test(abuse, writers_killed_at_random_on_a_cold_cache, .timeout = 120) {
  fresh_dir();
  enum { KIDS = 8, KILLS = 50, MIN_KILLS = 8 };
  const double WINDOW = 20.0;
  pid_t kids[KIDS];
  pid_t killed[KILLS + KIDS];
  int nkilled = 0;
  unsigned rng = (unsigned)getpid() * 2654435761u;
  for (int i = 0; i < KIDS; i++) {
    kids[i] = fork();
    cr_assert_neq(kids[i], -1);
    if (kids[i] == 0) { racer((unsigned)i); _exit(0); }
  }
  const double t0 = mono_s();
  int mid_write = 0;
  for (int k = 0; k < KILLS && mono_s() - t0 < WINDOW; k++) {
    rng = rng * 1103515245u + 12345u;
    int i = (int)((rng >> 4) % KIDS);
    if (k % 2) {
      /* every other kill goes to whichever racer first holds a temporary file open (a
         poll without a nap, for up to a second), so that writes are cut short too, not
         only compiles */
      for (const double until = mono_s() + 1.0; mono_s() < until;) {
        int w = -1;
        for (int j = 0; j < KIDS && w < 0; j++)
          if (writing(kids[(i + j) % KIDS])) w = (i + j) % KIDS;
        if (w >= 0) { i = w, mid_write++; break; }
      }
    } else {
      struct timespec nap = {0, (20 + (long)((rng >> 8) % 300)) * 1000000L};
      nanosleep(&nap, NULL);
    }
    kill(kids[i], SIGKILL);
    waitpid(kids[i], NULL, 0);
    killed[nkilled++] = kids[i];
    kids[i] = fork();
    cr_assert_neq(kids[i], -1);
    if (kids[i] == 0) { racer(rng); _exit(0); }
  }
  const int scheduled = nkilled;
  for (int i = 0; i < KIDS; i++) {
    kill(kids[i], SIGKILL);
    waitpid(kids[i], NULL, 0);
    killed[nkilled++] = kids[i];
  }
  cr_log_info("%d kills in %.1f s, %d of them while a temporary file was open", nkilled, mono_s() - t0,
              mid_write);
  cr_assert_geq(scheduled, MIN_KILLS, "only %d kills in %.0f s", scheduled, WINDOW);
  cr_assert_geq(mid_write, (scheduled + 7) / 8, "only %d of %d kills landed while a temporary file was open",
                mid_write, scheduled);

  /* an independent reader (the format as the header's comment states it) checks every file */
  char cmd[8192], pids[4096] = "";
  size_t n = 0;
  for (int i = 0; i < nkilled; i++) n += (size_t)snprintf(pids + n, sizeof pids - n, "%s%d", i ? "," : "", (int)killed[i]);
  const char *src = getenv("BQ_TEST_SOURCE_DIR");
  snprintf(cmd, sizeof cmd, "python3 %s/tests/check_cache_entries.py %s %s", src ? src : ".", dir_, pids);
  int rc = system(cmd);
  cr_assert_eq(rc, 0, "%s: exit %d", cmd, rc);
  cr_assert_geq(count_files(dir_, ".bqk"), 1);

  /* a fresh select of each kernel works, from the disk */
  fake_gpu();
  count_warnings();
  for (int i = 0; i < RACE_OPS; i++) {
    bq_plan *p = NULL;
    bq_status st = select_(race_ops[i], &p);
    cr_assert_eq(st, BQ_SUCCESS, "select %d: %s: %s", i, bq_status_name(st), bq_last_error());
    cr_assert(strstr(bq_plan_sku(p), ".sm_90"), "%s", bq_plan_sku(p));
    bq_plan_destroy(p);
  }
  bq_cache_stats s = stats_();
  cr_assert_eq(s.disk_hits + s.misses, RACE_OPS);
  cr_assert_eq(s.corrupt, 0, "a killed writer left a damaged entry");
  cr_assert_eq(s.write_failures, 0);
  cr_assert_eq(warnings_, 0, "%s", warning_[0]);
}
