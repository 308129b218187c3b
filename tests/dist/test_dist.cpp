// tempura::dist under mpirun (ctest dist_np2 at -np 2, dist_np4 under long at -np 4; the plain
// `dist` test runs this executable alone, a world of one). Every rank runs every case in the same
// order: the cases' collectives pair up across ranks.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tempura/dist.hpp"
#include "tempura/nn/module.hpp"
#include "tempura/support/env.hpp"
#include "tempura/tensor/optim.hpp"

using tempura::DType;
using tempura::Tensor;
namespace dist = tempura::dist;
namespace nn = tempura::nn;

namespace {

// Starts MPI once for the process; finalizes it at exit (registered after init's own exit hook,
// so it runs first and the exit is a clean one).
bool up() {
    static const bool ok = [] {
        if (!dist::available()) return false;
        dist::init();
        std::atexit([] { dist::finalize(); });
        return true;
    }();
    if (!ok) MESSAGE("SKIPPED: Tempura was built without MPI");
    return ok;
}

// Rank r's element i: small integers (exact in every dtype, bool: odd or not).
double value(int r, int64_t i) {
    return static_cast<double>((i * 7 + r * 3) % 11) - (i % 3 == 0 ? 0 : 2);
}

Tensor rank_tensor(int r, const tempura::Shape& shape, DType dt) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        double x = value(r, i);
        if (dt.is_unsigned()) x = std::abs(x);
        if (dt.is_bool()) x = static_cast<double>((i + r) % 3 == 0);
        v[static_cast<size_t>(i)] = x;
    }
    return Tensor::from_vector(v, shape).cast(dt);
}

const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Int8,    DType::Int16,   DType::Int32,   DType::Int64,
                                    DType::UInt8,   DType::UInt16,  DType::UInt32,  DType::UInt64,
                                    DType::Bool};

} // namespace

TEST_CASE("dist: rank and world size come from the launcher") {
    if (!up()) return;
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    CHECK(dist::world_size() == (size != nullptr ? std::atoi(size) : 1));
    CHECK(dist::rank() >= 0);
    CHECK(dist::rank() < dist::world_size());
}

TEST_CASE("dist: all_reduce of every dtype and op, odd sizes") {
    if (!up()) return;
    const int w = dist::world_size(), me = dist::rank();
    for (DType dt : kDTypes)
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}})
            for (auto op : {dist::ReduceOp::Sum, dist::ReduceOp::Max, dist::ReduceOp::Min,
                            dist::ReduceOp::Mean})
                for (bool det : {false, true}) {
                    if (op == dist::ReduceOp::Mean && dt.is_bool()) continue;
                    CAPTURE(dt.name());
                    CAPTURE(n);
                    CAPTURE(static_cast<int>(op));
                    CAPTURE(det);
                    const Tensor got = dist::all_reduce(rank_tensor(me, {n}, dt), op, det);
                    // The expected values from every rank's tensor, reduced here.
                    std::vector<double> want(static_cast<size_t>(n));
                    for (int r = 0; r < w; ++r) {
                        const std::vector<double> v = rank_tensor(r, {n}, dt).to_vector<double>();
                        for (int64_t i = 0; i < n; ++i) {
                            double& a = want[static_cast<size_t>(i)];
                            const double x = v[static_cast<size_t>(i)];
                            if (r == 0)
                                a = x;
                            else if (op == dist::ReduceOp::Max)
                                a = std::max(a, x);
                            else if (op == dist::ReduceOp::Min)
                                a = std::min(a, x);
                            else
                                a = dt.is_bool() ? static_cast<double>(a != 0 || x != 0) : a + x;
                        }
                    }
                    Tensor expect = Tensor::from_vector(want, {n}).cast(dt);
                    if (op == dist::ReduceOp::Mean)
                        expect = expect / Tensor::full({}, static_cast<double>(w), dt);
                    CHECK(got.to_vector<double>() == expect.to_vector<double>());
                }
}

TEST_CASE("dist: broadcast, all_gather and reduce_scatter") {
    if (!up()) return;
    const int w = dist::world_size(), me = dist::rank();
    for (DType dt : kDTypes) {
        CAPTURE(dt.name());
        for (int root = 0; root < w; ++root)
            CHECK(dist::broadcast(rank_tensor(me, {3, 5}, dt), root).to_vector<double>() ==
                  rank_tensor(root, {3, 5}, dt).to_vector<double>());
        std::vector<Tensor> parts;
        for (int r = 0; r < w; ++r) parts.push_back(rank_tensor(r, {3, 5}, dt));
        for (int64_t axis : {0, 1, -1}) {
            CAPTURE(axis);
            CHECK(dist::all_gather(rank_tensor(me, {3, 5}, dt), axis).to_vector<double>() ==
                  Tensor::cat(parts, axis).to_vector<double>());
        }
        if (dt.is_bool()) continue;
        for (bool det : {false, true}) {
            const Tensor got =
                dist::reduce_scatter(rank_tensor(me, {2 * w, 3}, dt), dist::ReduceOp::Sum, det);
            Tensor sum = rank_tensor(0, {2 * w, 3}, dt);
            for (int r = 1; r < w; ++r) sum = sum + rank_tensor(r, {2 * w, 3}, dt);
            CHECK(got.shape() == tempura::Shape{2, 3});
            CHECK(got.to_vector<double>() ==
                  sum.slice({tempura::Slice{2 * me, 2 * me + 2}}).to_vector<double>());
        }
    }
    if (w > 1)
        CHECK_THROWS_WITH_AS(dist::reduce_scatter(Tensor::ones({2 * w + 1, 3})),
                             ("[reduce_scatter] [" + std::to_string(2 * w + 1) +
                              ", 3]: COLLECTIVE dim 0 of [" + std::to_string(2 * w + 1) +
                              ", 3] does not split into " + std::to_string(w) + " equal parts")
                                 .c_str(),
                             tempura::Error);
    if (w > 1)
        CHECK_THROWS_WITH_AS(
            dist::broadcast(Tensor::ones({2}), w),
            ("[broadcast] root " + std::to_string(w) + " is not a rank of " + std::to_string(w))
                .c_str(),
            tempura::Error);
}

TEST_CASE("dist: a collective splits the plan, the kernels on each side still fuse") {
    if (!up()) return;
    const int w = dist::world_size();
    Tensor x = Tensor::from_vector(std::vector<float>{1, -2, 3, -4, 5, -6, 7}, {7});
    x.realize();
    // x * 2 + 1 is one kernel, the collective a step, (y * 3).relu() - 1 another kernel. In a
    // world of one the collective is the identity: the whole expression is one kernel.
    Tensor y = dist::all_reduce(x * 2.0f + 1.0f);
    Tensor z = (y * 3.0f).relu() - 1.0f;
    const std::vector<float> got = z.to_vector();
    CHECK(z.kernels().size() == (w == 1 ? 1 : 2));
    const std::vector<float> xs = x.to_vector();
    for (size_t i = 0; i < xs.size(); ++i)
        CHECK(got[i] == std::max(0.0f, 3.0f * (static_cast<float>(w) * (xs[i] * 2 + 1))) - 1.0f);
    // On a realized tensor the collective reads its buffer: the consumer is the only kernel.
    Tensor m = dist::all_reduce(x, dist::ReduceOp::Mean) + 1.0f;
    const std::vector<float> mv = m.to_vector();
    CHECK(m.kernels().size() == 1);
    for (size_t i = 0; i < xs.size(); ++i) CHECK(mv[i] == xs[i] * w / w + 1.0f);
    // Two collectives of one plan, both in flight before either is read.
    Tensor a = dist::all_reduce(x + 1.0f), b = dist::all_reduce(x - 1.0f);
    Tensor s = a * b;
    const std::vector<float> sv = s.to_vector();
    CHECK(s.kernels().size() == (w == 1 ? 1 : 3)); // x + 1, x - 1, a * b; at 1: (x+1) * (x-1)
    for (size_t i = 0; i < xs.size(); ++i)
        CHECK(sv[i] ==
              (static_cast<float>(w) * (xs[i] + 1)) * (static_cast<float>(w) * (xs[i] - 1)));
}

TEST_CASE("dist: ranks that disagree on a shape are named") {
    if (!up()) return;
    const int w = dist::world_size(), me = dist::rank();
    if (w < 2) return;
    std::string want;
    for (int r = 0; r < w; ++r)
        want += std::string(r ? "," : "") + " rank " + std::to_string(r) +
                " has all_reduce of float32 [" + std::to_string(3 + r) + "]";
    try {
        dist::all_reduce(Tensor::ones({3 + me})).realize();
        FAIL("no error");
    } catch (const tempura::Error& e) {
        const std::string msg = e.what();
        CHECK(msg.rfind("[all_reduce] ranks disagree on collective #", 0) == 0);
        CHECK(msg.substr(msg.find(':')) == ":" + want);
    }
    // Dtypes too; and the runtime goes on afterwards (the mismatch moved no data).
    try {
        dist::all_reduce(Tensor::ones({4}, me == 0 ? DType::Float32 : DType::Int32)).realize();
        FAIL("no error");
    } catch (const tempura::Error& e) {
        CHECK(std::string(e.what()).find(" rank 1 has all_reduce of int32 [4]") !=
              std::string::npos);
    }
    CHECK(dist::all_reduce(Tensor::ones({2})).to_vector() ==
          std::vector<float>(2, static_cast<float>(w)));
}

TEST_CASE("dist: DistributedSampler shards, pads and reshuffles") {
    // Pure arithmetic: no MPI needed.
    dist::DistributedSampler s0(10, false, 0, false, 0, 4), s3(10, false, 0, false, 3, 4);
    CHECK(s0.indices() == std::vector<int64_t>{0, 4, 8});
    CHECK(s3.indices() == std::vector<int64_t>{3, 7, 1}); // padded with the first indices
    CHECK(dist::DistributedSampler(10, false, 0, true, 3, 4).indices() ==
          std::vector<int64_t>{3, 7});
    dist::DistributedSampler a(100, true, 7, false, 0, 2), b(100, true, 7, false, 1, 2);
    std::vector<int64_t> all = a.indices();
    const std::vector<int64_t> bi = b.indices();
    all.insert(all.end(), bi.begin(), bi.end());
    std::sort(all.begin(), all.end());
    for (int64_t i = 0; i < 100; ++i) CHECK(all[static_cast<size_t>(i)] == i);
    const std::vector<int64_t> e0 = a.indices();
    a.set_epoch(1);
    CHECK(a.indices() != e0);
    a.set_epoch(0);
    CHECK(a.indices() == e0);
    CHECK_THROWS_WITH_AS(dist::DistributedSampler(10, true, 0, false, 4, 4),
                         "[DistributedSampler] rank 4 is not a rank of 4", tempura::Error);
}

namespace {

// The global batch (same on every rank): inputs and targets of `n` samples.
struct Batch {
    Tensor x, y;
};
Batch global_batch(int64_t n, const tempura::Shape& sample, int64_t classes, uint64_t seed) {
    tempura::manual_seed(seed);
    tempura::Shape s{n};
    s.insert(s.end(), sample.begin(), sample.end());
    Tensor x = Tensor::randn(s);
    Tensor y = Tensor::randint(0, classes, {n});
    x.realize();
    y.realize();
    return {x, y};
}

// Rows [r * b, (r + 1) * b) as a realized tensor of its own (what rank r loads).
Tensor shard(const Tensor& t, int r, int64_t b) {
    Tensor s = t.slice({tempura::Slice{r * b, (r + 1) * b}}).contiguous();
    s.realize();
    return s;
}

nn::Sequential make_mlp() {
    return nn::Sequential(nn::Linear(12, 16),
                          nn::Functional([](const Tensor& t) { return t.relu(); }),
                          nn::Linear(16, 5));
}

nn::Sequential make_cnn() {
    return nn::Sequential(nn::Conv2d(2, 4, 3),
                          nn::Functional([](const Tensor& t) { return t.relu(); }),
                          nn::Functional([](const Tensor& t) {
                              return nn::max_pool2d(t, nn::PoolOptions{{2, 2}});
                          }),
                          nn::Functional([](const Tensor& t) {
                              return t.reshape({t.shape()[0], -1});
                          }),
                          nn::Linear(4 * 3 * 3, 5));
}

std::vector<std::vector<float>> values(const nn::Module& m) {
    std::vector<std::vector<float>> v;
    for (const Tensor& p : m.parameters()) v.push_back(p.to_vector());
    return v;
}

// Trains `model` (already equal on every rank) for `steps` SGD steps on this rank's shard, with
// DataParallel; returns its parameters.
template <class Make>
void check_training(Make make, const tempura::Shape& sample, bool deterministic) {
    const int w = dist::world_size(), me = dist::rank();
    const int64_t b = 3, steps = 3;
    const float lr = 0.1f;
    // Different initial values on each rank: DataParallel broadcasts rank 0's.
    tempura::manual_seed(1000 + static_cast<uint64_t>(me));
    nn::Sequential model = make();
    dist::DataParallel ddp(model, dist::DataParallel::Options{25, deterministic, true});
    std::vector<std::vector<float>> start = values(model);
    nn::SGD opt(model.parameters(), lr);
    // The reference: a model of rank 0's initial values on one process.
    tempura::manual_seed(1000);
    nn::Sequential ref = make();
    CHECK(values(ref) == start);
    nn::SGD ref_opt(ref.parameters(), lr);
    tempura::manual_seed(1000);
    nn::Sequential acc = make(); // single process, the ranks' gradients summed in rank order
    nn::SGD acc_opt(acc.parameters(), lr);
    for (int64_t step = 0; step < steps; ++step) {
        const Batch g = global_batch(b * w, sample, 5, 77 + static_cast<uint64_t>(step));
        opt.zero_grad();
        ddp.backward(nn::cross_entropy(ddp(shard(g.x, me, b)), shard(g.y, me, b)));
        opt.step();
        // One process, the global batch at once.
        ref_opt.zero_grad();
        nn::cross_entropy(ref(g.x), g.y).backward();
        ref_opt.step();
        // One process, each shard's gradients as DataParallel flattens them (one bucket, the
        // parameters in reverse order, computed in a plan with the shard's loss as the ranks'
        // plans compute them), summed in rank order and divided by W: the deterministic
        // all_reduce's exact sequence of float operations.
        std::vector<Tensor> params = acc.parameters();
        Tensor sum;
        for (int r = 0; r < w; ++r) {
            Tensor loss = nn::cross_entropy(acc(shard(g.x, r, b)), shard(g.y, r, b));
            std::vector<Tensor> gr = tempura::gradients(loss, params), flat;
            for (size_t k = gr.size(); k-- > 0;) flat.push_back(gr[k].reshape({-1}));
            Tensor joined = Tensor::cat(flat, 0);
            tempura::realize({loss, joined});
            sum = r == 0 ? joined : (sum + joined).contiguous();
            sum.realize();
        }
        const Tensor mean = sum / Tensor::full({}, static_cast<double>(w), DType::Float32);
        acc_opt.zero_grad();
        Tensor surrogate = Tensor::zeros({});
        int64_t at = sum.numel();
        for (size_t k = 0; k < params.size(); ++k) {
            at -= params[k].numel();
            Tensor mk =
                mean.slice({tempura::Slice{at, at + params[k].numel()}}).reshape(params[k].shape());
            mk.realize();
            surrogate = surrogate + (params[k] * mk).sum(); // its gradient is exactly mk
        }
        surrogate.backward();
        acc_opt.step();
    }
    const auto mine = values(model), one = values(ref), summed = values(acc);
    for (size_t k = 0; k < mine.size(); ++k)
        for (size_t i = 0; i < mine[k].size(); ++i) {
            CHECK(mine[k][i] == doctest::Approx(one[k][i]).epsilon(1e-4));
            if (deterministic) CHECK(mine[k][i] == summed[k][i]);
        }
    // Every rank holds the same values.
    for (const Tensor& p : model.parameters()) {
        const Tensor lo = dist::all_reduce(p, dist::ReduceOp::Min);
        const Tensor hi = dist::all_reduce(p, dist::ReduceOp::Max);
        CHECK(lo.to_vector() == hi.to_vector());
    }
}

} // namespace

TEST_CASE("dist: DataParallel MLP training equals one process on the global batch") {
    if (!up()) return;
    check_training(make_mlp, {12}, false);
    check_training(make_mlp, {12}, true);
}

TEST_CASE("dist: DataParallel CNN training equals one process on the global batch") {
    if (!up()) return;
    check_training(make_cnn, {2, 8, 8}, true);
}

TEST_CASE("dist: DataParallel buckets, reverse order, bounded by size") {
    if (!up()) return;
    tempura::manual_seed(5);
    nn::Sequential m = make_mlp(); // weights 16x12, 16, 5x16, 5 floats
    dist::DataParallel big(m);
    CHECK(big.buckets() == std::vector<std::vector<size_t>>{{3, 2, 1, 0}});
    // 400 bytes a bucket: 5x16 (320 B) + 5 (20 B) fit; 16 x 12 (768 B) is alone.
    dist::DataParallel small(m, dist::DataParallel::Options{400.0 / (1024 * 1024), false, true});
    CHECK(small.buckets() == std::vector<std::vector<size_t>>{{3, 2}, {1}, {0}});
    std::vector<Tensor> plain{Tensor::ones({2})};
    CHECK_THROWS_WITH_AS(dist::DataParallel(std::vector<Tensor>{Tensor::ones({2})}),
                         "[DataParallel] parameter 0 does not require a gradient", tempura::Error);
}

TEST_CASE("dist: DataParallel's gradients stay bounded over backward() calls without a step") {
    if (!up()) return;
    // As loss.backward() does: the 8th call that adds to a parameter's lazy gradient realizes it,
    // so that the lazy graph does not grow without end.
    Tensor p = Tensor::ones({3});
    p.requires_grad();
    dist::DataParallel ddp(std::vector<Tensor>{p});
    for (int i = 1; i <= 8; ++i) {
        ddp.backward((p * 2.0f).sum());
        if (i >= 2) CHECK(p.grad().is_realized() == (i == 8));
    }
    CHECK(p.grad().to_vector() == std::vector<float>(3, 16.0f));
    ddp.backward((p * 2.0f).sum());
    CHECK(!p.grad().is_realized());
    CHECK(p.grad().to_vector() == std::vector<float>(3, 18.0f));
}

TEST_CASE("dist: a TEMPURA_LIBNCCL that does not load is named once") {
    // ctest dist_nccl_missing names a file that is not there; other runs skip this case.
    const char* set = std::getenv("TEMPURA_LIBNCCL");
    const std::string path = set != nullptr ? set : "";
    if (path.empty() || path == "none" || std::filesystem::exists(path)) return;
    if (!up()) return;
    const std::string want = "[dist] TEMPURA_LIBNCCL=" + path + " cannot be loaded (" + path +
                             ": cannot open shared object file: No such file or directory): "
                             "CUDA collectives go through host memory";
    const std::vector<std::string> said = tempura::env::warnings_given();
    CHECK(std::count(said.begin(), said.end(), want) == 1);
}

TEST_CASE("dist cuda mock: CUDA tensors, through NCCL or host memory") {
    // ctest dist_cuda_mock runs it on the mock CUDA driver, dist_nccl_mock with the mock NCCL too.
    const char* mock = std::getenv("TEMPURA_EXPECT_MOCK");
    if (mock == nullptr || std::strcmp(mock, "1") != 0) return;
    if (!up()) return;
    const char* nccl_path = std::getenv("TEMPURA_LIBNCCL");
    const bool nccl =
        nccl_path != nullptr && *nccl_path != '\0' && std::strcmp(nccl_path, "none") != 0;
    const int w = dist::world_size(), me = dist::rank();
    const dist::CommStats before = dist::comm_stats();
    Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {5}).to("CUDA") *
               static_cast<float>(me + 1);
    Tensor y = dist::all_reduce(x) + 1.0f;
    CHECK(y.device() == "CUDA:0");
    const float k = static_cast<float>(w * (w + 1) / 2);
    CHECK(y.to_vector() == std::vector<float>{k + 1, 2 * k + 1, 3 * k + 1, 4 * k + 1, 5 * k + 1});
    CHECK(dist::all_reduce(x, dist::ReduceOp::Max).to_vector() ==
          std::vector<float>{1.0f * w, 2.0f * w, 3.0f * w, 4.0f * w, 5.0f * w});
    CHECK(dist::all_reduce(x.cast(DType::Int64), dist::ReduceOp::Min).to_vector<int64_t>() ==
          std::vector<int64_t>{1, 2, 3, 4, 5});
    Tensor g = dist::all_gather(Tensor::full({2}, static_cast<float>(me)).to("CUDA"));
    std::vector<float> want;
    for (int r = 0; r < w; ++r)
        want.insert(want.end(), {static_cast<float>(r), static_cast<float>(r)});
    CHECK(g.to_vector() == want);
    CHECK(dist::broadcast(x, w - 1).to_vector() ==
          std::vector<float>{1.0f * w, 2.0f * w, 3.0f * w, 4.0f * w, 5.0f * w});
    Tensor rs = dist::reduce_scatter(Tensor::ones({2 * w, 3}, DType::Int32).to("CUDA"));
    CHECK(rs.to_vector<int32_t>() == std::vector<int32_t>(6, w));
    // int16 has no NCCL type, deterministic wants rank order: both through host memory.
    CHECK(dist::all_reduce(x.cast(DType::Int16)).to_vector<int16_t>() ==
          std::vector<int16_t>{static_cast<int16_t>(k), static_cast<int16_t>(2 * k),
                               static_cast<int16_t>(3 * k), static_cast<int16_t>(4 * k),
                               static_cast<int16_t>(5 * k)});
    CHECK(dist::all_reduce(x, dist::ReduceOp::Sum, true).to_vector() ==
          std::vector<float>{k, 2 * k, 3 * k, 4 * k, 5 * k});
    const dist::CommStats after = dist::comm_stats();
    CHECK(after.collectives - before.collectives == 8);
    CHECK(after.nccl - before.nccl == (nccl ? 6 : 0));
    if (nccl) {
        // The mock counts what reached it: the id, the communicator, the six collectives.
        void* lib = dlopen(nccl_path, RTLD_NOW | RTLD_NOLOAD);
        REQUIRE(lib != nullptr);
        auto calls = reinterpret_cast<int (*)()>(dlsym(lib, "tempura_mock_nccl_calls"));
        REQUIRE(reinterpret_cast<void*>(calls) != nullptr);
        CHECK(calls() == (me == 0 ? 8 : 7));
        dlclose(lib);
    }
    // A shape mismatch is caught on the CUDA path too (the first run's check, over MPI).
    if (w > 1) {
        try {
            dist::all_reduce(Tensor::ones({3 + me}).to("CUDA")).realize();
            FAIL("no error");
        } catch (const tempura::Error& e) {
            CHECK(std::string(e.what()).find(" rank 1 has all_reduce of float32 [4]") !=
                  std::string::npos);
        }
    }
}
