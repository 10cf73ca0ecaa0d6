// consumer.cpp — the same as consumer.c from C++, built by CMake through find_package(coil)
// and the coil::coil target: the header compiles as C++ and links as C.
#include <coil/coil.h>

#include <cstdio>
#include <vector>

int main(int argc, char **argv)
{
    coil_error err;
    coil_model *m = argc > 1 ? coil_load(argv[1], nullptr, &err) : nullptr;
    coil_dim_size b = {"B", 2};
    if (!m || !coil_init_params(m, 0, &b, 1, &err)) {
        std::fprintf(stderr, "consumer++: %s\n", argc > 1 ? err.message : "usage: MODEL");
        return 1;
    }
    const coil_info *in = coil_info_at(m, COIL_INPUT, 0);
    coil_tensor x{};
    x.dtype = in->dtype, x.rank = in->rank;
    for (int d = 0; d < in->rank; d++)
        x.shape[d] = in->shape[d] < 0 ? b.size : in->shape[d];
    std::vector<float> data(static_cast<size_t>(coil_tensor_numel(&x)), 0.5f);
    x.data = data.data();
    std::vector<coil_tensor> out(static_cast<size_t>(coil_count(m, COIL_OUTPUT)));
    if (!coil_run(m, &x, 1, out.data(), static_cast<int>(out.size()), &err)) {
        std::fprintf(stderr, "consumer++: %s\n", err.message);
        return 1;
    }
    std::printf("coil %s from C++: %d outputs, the first %s\n", coil_version(),
                static_cast<int>(out.size()), coil_info_at(m, COIL_OUTPUT, 0)->type);
    for (auto &t : out)
        coil_tensor_free(&t);
    coil_free(m);
    return 0;
}
