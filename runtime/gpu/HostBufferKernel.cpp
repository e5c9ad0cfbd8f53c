//===- HostBufferKernel.cpp - Run a module on host buffers, anywhere ------===//

#include "mla/Runtime/HostBufferKernel.h"

#include "mla/Runtime/CpuKernel.h"
#include "mla/Runtime/GpuKernel.h"

namespace mla {

namespace {

class OnCpu : public HostBufferKernel {
public:
  explicit OnCpu(std::unique_ptr<CpuKernel> kernel) : kernel(std::move(kernel)) {}
  llvm::Error run(const std::vector<BufferView> &args) override {
    return kernel->run(args);
  }
  std::string where() const override { return "host CPU"; }

private:
  std::unique_ptr<CpuKernel> kernel;
};

class OnGpu : public HostBufferKernel {
public:
  explicit OnGpu(std::unique_ptr<GpuKernel> kernel) : kernel(std::move(kernel)) {}

  llvm::Error run(const std::vector<BufferView> &args) override {
    std::vector<cuda::DeviceBuffer> buffers;
    std::vector<BufferView> deviceArgs;
    for (const BufferView &arg : args) {
      // A strided view moves the span from its first element to its last.
      int64_t span = arg.numElements() ? 1 : 0;
      for (size_t d = 0; span && d < arg.shape.size(); ++d)
        span += (arg.shape[d] - 1) * arg.strides[d];
      size_t bytes = size_t(span) * byteWidth(arg.dtype);
      auto buffer = cuda::DeviceBuffer::allocate(bytes);
      if (!buffer)
        return buffer.takeError();
      if (bytes)
        if (llvm::Error e = buffer->copyFromHost(arg.data, bytes))
          return e;
      BufferView view = arg;
      view.data = reinterpret_cast<void *>(buffer->ptr());
      deviceArgs.push_back(view);
      buffers.push_back(std::move(*buffer));
    }
    if (llvm::Error e = kernel->run(deviceArgs))
      return e;
    for (size_t i = 0; i < args.size(); ++i)
      if (buffers[i].size())
        if (llvm::Error e =
                buffers[i].copyToHost(args[i].data, buffers[i].size()))
          return e;
    return llvm::Error::success();
  }
  std::string where() const override {
    return "GPU (" + kernel->target().chip() + ")";
  }

private:
  std::unique_ptr<GpuKernel> kernel;
};

} // namespace

llvm::Expected<std::unique_ptr<HostBufferKernel>>
HostBufferKernel::compile(mlir::OwningOpRef<mlir::ModuleOp> module,
                          llvm::StringRef entry, const cuda::Device *device,
                          std::optional<GpuTarget> target) {
  if (device) {
    auto kernel =
        GpuKernel::compile(std::move(module), entry, *device, target);
    if (!kernel)
      return kernel.takeError();
    return std::make_unique<OnGpu>(std::move(*kernel));
  }
  auto kernel = CpuKernel::compile(std::move(module), entry);
  if (!kernel)
    return kernel.takeError();
  return std::make_unique<OnCpu>(std::move(*kernel));
}

} // namespace mla
