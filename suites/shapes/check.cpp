// shapes: the forward works on non-contiguous input (channels_last) and agrees with the
// contiguous forward within tolerance (convolution kernels for the two layouts may round
// differently: rtol 1e-5, atol 1e-6).
#include <torch/torch.h>

#include "harness/util/text_format.h"
#include "suites/support/kit.h"
#include "suites/support/tensor_compare.h"

namespace tc {
namespace {

CheckResult check_shapes(const CheckContext& ctx) {
  std::unique_ptr<Run> run = fresh_run(ctx, run_options(ctx, ctx.seed));
  run->train_step();  // BatchNorm statistics away from their initial values
  const at::Tensor x = run->example_input(8);
  if (x.dim() != 4) throw SkipCell("the recipe's input is not a 4-d image batch: channels_last does not apply");
  at::Tensor xc = x.contiguous(at::MemoryFormat::ChannelsLast);
  std::string layout = "channels_last";
  if (xc.is_contiguous()) {
    // One channel (a grayscale image): channels_last is the contiguous layout. Rows and columns
    // swapped in memory instead: the same values, as non-contiguous for a view as channels_last.
    xc = x.transpose(2, 3).contiguous().transpose(2, 3);
    layout = "columns-major (H and W swapped in memory)";
  }
  if (xc.is_contiguous()) throw SkipCell("the recipe's input " + nlohmann::json(x.sizes().vec()).dump() +
                                         " has no non-contiguous layout (one channel and one row or column)");
  const at::Tensor y = run->predict(x).cpu();
  Findings f;
  f.metrics()["input_strides"] = xc.strides().vec();
  // A forward that views its input as contiguous throws LibTorch's view error here: the detection
  // the check declares (below). Any other error is not one (the runner makes it `error` for a
  // variant this check must catch).
  const at::Tensor yc = run->predict(xc).cpu();
  const double diff = max_abs_diff(y, yc);
  f.metrics()["max_abs_diff"] = diff;
  if (!torch::allclose(y, yc, 1e-5, 1e-6)) {
    f.broken("non_contiguous_input", layout + " and contiguous inputs give different outputs (max |diff| " +
                                         fmt::sig(diff, 3) + ", beyond rtol 1e-5 / atol 1e-6)");
  } else {
    f.held("non_contiguous_input", "forward on " + layout + " input (strides " +
                                       nlohmann::json(xc.strides().vec()).dump() +
                                       ") matches the contiguous one (max |diff| " + fmt::sig(diff, 3) + ")");
  }
  return f.result();
}

}  // namespace
}  // namespace tc

namespace tc {
TC_CHECK(shapes,
         "the forward works on non-contiguous (channels_last) input")
    ->Promise("non_contiguous_input", "the forward works on non-contiguous (channels_last) input")
    ->DetectsByThrowing("non_contiguous_input", "view size is not compatible with input tensor's size and stride");
}  // namespace tc
