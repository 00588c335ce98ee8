// The sim device's kernels, as a vendor extension registers its own: tensor factories on
// the plugin's allocator, copies through the plugin's memory_copy (the only way in or
// out of device memory), the view operators (which must alias, so no fallback may copy
// them), convolution (LibTorch sends an unknown device to the *_overrideable entries),
// and the boxed CPU fallback for every other operator: arguments are copied to the host,
// the CPU kernel runs, results and mutated arguments are copied back.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "sim_torch.h"

namespace accel_sim_torch {
namespace {

constexpr c10::DeviceType kSim = c10::DeviceType::PrivateUse1;

bool on_sim(const at::Tensor& t) { return t.device().type() == kSim; }

int32_t sim_index(const at::Tensor& t) { return t.device().has_index() ? t.device().index() : 0; }

void copy_bytes(accel_memory_copy_kind kind, int32_t device, int32_t src_device, void* dst,
                const void* src, size_t bytes) {
  if (bytes == 0) return;
  accel_memory_copy_args args{};
  args.struct_size = ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE;
  args.kind = kind;
  args.device = device;
  args.src_device = src_device;
  args.dst = dst;
  args.src = src;
  args.size_bytes = bytes;
  args.stream = nullptr;  // synchronous: a kernel here is done when it returns
  check(plugin().memory_copy(&args), "memory_copy");
}

// Elements from a strided tensor's first element to its last: what a copy of it moves.
int64_t span_elements(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    TORCH_CHECK(t.stride(d) >= 0, "sim: negative strides are not supported");
    span += (t.size(d) - 1) * t.stride(d);
  }
  return span;
}

// A host tensor with t's contents, sizes and strides (a device-to-host copy of its span).
at::Tensor read_to_host(const at::Tensor& t) {
  const int64_t span = span_elements(t);
  at::Tensor host = at::empty({span}, t.options().device(at::kCPU));
  copy_bytes(ACCEL_COPY_DEVICE_TO_HOST, sim_index(t), 0, host.data_ptr(), t.data_ptr(),
             static_cast<size_t>(span) * t.element_size());
  return host.as_strided(t.sizes(), t.strides(), 0);
}

// Writes a host tensor made by read_to_host(t) back over t's span.
void write_from_host(const at::Tensor& t, const at::Tensor& host) {
  copy_bytes(ACCEL_COPY_HOST_TO_DEVICE, sim_index(t), 0, t.data_ptr(), host.data_ptr(),
             static_cast<size_t>(span_elements(t)) * t.element_size());
}

at::Tensor& sim_copy_(at::Tensor& self, const at::Tensor& src, bool /*non_blocking*/) {
  TORCH_CHECK((on_sim(self) || self.is_cpu()) && (on_sim(src) || src.is_cpu()),
              "sim: copy_ between ", src.device(), " and ", self.device(),
              ": only the CPU and sim devices");
  if (self.numel() == 0 || self.is_same(src)) return self;
  const bool plain = self.is_contiguous() && src.is_contiguous() && self.sizes() == src.sizes() &&
                     self.scalar_type() == src.scalar_type();
  if (plain) {
    const size_t bytes = self.nbytes();
    if (on_sim(self) && on_sim(src)) {
      copy_bytes(ACCEL_COPY_DEVICE_TO_DEVICE, sim_index(self), sim_index(src), self.data_ptr(),
                 src.data_ptr(), bytes);
    } else if (on_sim(self)) {
      copy_bytes(ACCEL_COPY_HOST_TO_DEVICE, sim_index(self), 0, self.data_ptr(), src.data_ptr(),
                 bytes);
    } else {
      copy_bytes(ACCEL_COPY_DEVICE_TO_HOST, sim_index(src), 0, self.data_ptr(), src.data_ptr(),
                 bytes);
    }
    return self;
  }
  // Strided, broadcast or converting: through host memory. src is read first, so a
  // copy between overlapping views of one storage sees the old values, as on the CPU.
  const at::Tensor src_host = on_sim(src) ? read_to_host(src) : src;
  if (!on_sim(self)) {
    self.copy_(src_host);
    return self;
  }
  at::Tensor host = read_to_host(self);
  host.copy_(src_host);
  write_from_host(self, host);
  return self;
}

at::Tensor sim_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  sim_copy_(out, self, non_blocking);
  return dst;
}

at::Tensor sim_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return sim_copy_from(self, dst, false);
}

c10::Device sim_device(c10::optional<at::Device> device) {
  if (device && device->has_index()) return *device;
  return {kSim, static_cast<c10::DeviceIndex>(current_device())};
}

at::Tensor sim_empty(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                     c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                     c10::optional<bool> /*pin_memory*/,
                     c10::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "sim: only strided tensors");
  const c10::DeviceGuard guard(sim_device(device));
  return at::detail::empty_generic(size, allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor sim_empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                             c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                             c10::optional<at::Device> device, c10::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "sim: only strided tensors");
  const c10::DeviceGuard guard(sim_device(device));
  return at::detail::empty_strided_generic(size, stride, allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

// As the CPU's resize_: contiguous strides for the new size, the storage grown (its old
// bytes moved on the device) when it is too small.
const at::Tensor& sim_resize_(const at::Tensor& self, at::IntArrayRef size,
                              c10::optional<at::MemoryFormat> memory_format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  const size_t needed =
      static_cast<size_t>(self.storage_offset() + impl->numel()) * self.element_size();
  c10::StorageImpl* storage = self.storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) {
    TORCH_CHECK(storage->resizable(), "sim: resize_ of a tensor whose storage is not resizable");
    const c10::DeviceGuard guard(self.device());
    c10::DataPtr grown = allocator()->allocate(needed);
    copy_bytes(ACCEL_COPY_DEVICE_TO_DEVICE, sim_index(self), sim_index(self), grown.get(),
               storage->data(), storage->nbytes());
    storage->set_data_ptr_noswap(std::move(grown));
    storage->set_nbytes(needed);
  }
  if (memory_format && *memory_format != at::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  return self;
}

// Points self at (part of) a device storage, as the CPU's set_ does: LibTorch's
// serializer reads a device tensor's storage through a tensor made this way.
at::Tensor& sim_set_storage_(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                             at::IntArrayRef size, at::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kSim, "sim: set_ to a storage on ", source.device(),
              "; expected one of this device");
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storage_offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  const size_t needed =
      static_cast<size_t>(storage_offset + span_elements(self)) * self.element_size();
  TORCH_CHECK(self.numel() == 0 || needed <= self.storage().nbytes(), "sim: set_ needs ", needed,
              " bytes of a storage of ", self.storage().nbytes());
  return self;
}

at::Tensor& sim_set_tensor_(at::Tensor& self, const at::Tensor& source) {
  return sim_set_storage_(self, source.storage(), source.storage_offset(), source.sizes(),
                          source.strides());
}

// LibTorch routes convolution on a device it does not know here; the host's kernels run
// it, so results equal the CPU's bit for bit.
at::Tensor sim_convolution(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                           at::IntArrayRef output_padding, int64_t groups) {
  c10::optional<at::Tensor> host_bias;
  if (bias && bias->defined()) host_bias = bias->cpu();
  return at::convolution(input.cpu(), weight.cpu(), host_bias, stride, padding, dilation,
                         transposed, output_padding, groups)
      .to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sim_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  const std::vector<int64_t> bias_sizes = {transposed ? weight.size(1) * groups : weight.size(0)};
  auto [grad_input, grad_weight, grad_bias] =
      at::convolution_backward(grad_output.cpu(), input.cpu(), weight.cpu(), bias_sizes, stride,
                               padding, dilation, transposed, output_padding, groups, output_mask);
  const auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input.device()) : t; };
  return {back(grad_input), back(grad_weight), back(grad_bias)};
}

// LibTorch's own view kernels, through functions of this file: with -fsanitize GCC cannot
// prove at compile time that another library's function is not null, which TORCH_FN
// asserts.
at::Tensor sim_as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                          c10::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}
at::Tensor sim_view(const at::Tensor& self, at::IntArrayRef size) {
  return at::native::view(self, size);
}
at::Tensor sim_reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// LibTorch 1.13's TensorImpl::has_compatible_shallow_copy_type counts CPU, CUDA, HIP,
// MPS and XPU as the dense backends, so set_data, and with it Module::to, would refuse
// to move a CPU parameter here. Strided tensors of the CPU and of this device are alike.
bool sim_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && !t.is_quantized() && (t.is_cpu() || on_sim(t));
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense(self) && dense(from));
}

// A kernel on the runtime key wins over the operator's CompositeImplicitAutograd one.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(sim_compatible_shallow_copy_type));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(sim_empty));
  m.impl("empty_strided", TORCH_FN(sim_empty_strided));
  m.impl("resize_", TORCH_FN(sim_resize_));
  m.impl("copy_", TORCH_FN(sim_copy_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(sim_set_storage_));
  m.impl("set_.source_Tensor", TORCH_FN(sim_set_tensor_));
  m.impl("_copy_from", TORCH_FN(sim_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(sim_copy_from_and_resize));
  // Views share the device storage; a fallback would return a host copy instead.
  m.impl("as_strided", TORCH_FN(sim_as_strided));
  m.impl("view", TORCH_FN(sim_view));
  m.impl("_reshape_alias", TORCH_FN(sim_reshape_alias));
  m.impl("convolution_overrideable", TORCH_FN(sim_convolution));
  m.impl("convolution_backward_overrideable", TORCH_FN(sim_convolution_backward));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&at::native::cpu_fallback>());
}

}  // namespace
}  // namespace accel_sim_torch
