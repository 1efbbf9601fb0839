// A tiny ResNet: stem, two residual blocks, head. 8x3x16x16 images.
func.func @tiny_resnet() -> tensor<f32> {
  %img = dtfm.input "images" {dtfm.layer = "stem"} : tensor<8x3x16x16xf32>
  %w0 = dtfm.param "stem.w" init(normal, 0.1) {dtfm.layer = "stem"} : tensor<8x3x3x3xf32>
  %c0 = dtfm.conv2d %img, %w0 {padding = array<i64: 1, 1, 1, 1>, dtfm.layer = "stem"} : (tensor<8x3x16x16xf32>, tensor<8x3x3x3xf32>) -> tensor<8x8x16x16xf32>
  %g0 = dtfm.param "stem.g" init(ones) {dtfm.layer = "stem"} : tensor<8xf32>
  %b0 = dtfm.param "stem.b" init(zeros) {dtfm.layer = "stem"} : tensor<8xf32>
  %m0 = dtfm.param "stem.mean" init(zeros) frozen {dtfm.layer = "stem"} : tensor<8xf32>
  %v0 = dtfm.param "stem.var" init(ones) frozen {dtfm.layer = "stem"} : tensor<8xf32>
  %n0 = dtfm.batchnorm %c0, %g0, %b0, %m0, %v0 {dtfm.layer = "stem"} : (tensor<8x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x8x16x16xf32>
  %r0 = dtfm.relu %n0 {dtfm.layer = "stem"} : (tensor<8x8x16x16xf32>) -> tensor<8x8x16x16xf32>
  %p0 = dtfm.max_pool2d %r0 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, dtfm.layer = "stem"} : (tensor<8x8x16x16xf32>) -> tensor<8x8x8x8xf32>

  %w1 = dtfm.param "block1.w" init(normal, 0.1) {dtfm.layer = "block1"} : tensor<8x8x3x3xf32>
  %c1 = dtfm.conv2d %p0, %w1 {padding = array<i64: 1, 1, 1, 1>, dtfm.layer = "block1"} : (tensor<8x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<8x8x8x8xf32>
  %r1 = dtfm.relu %c1 {dtfm.layer = "block1"} : (tensor<8x8x8x8xf32>) -> tensor<8x8x8x8xf32>
  %s1 = dtfm.add %r1, %p0 {dtfm.layer = "block1"} : (tensor<8x8x8x8xf32>, tensor<8x8x8x8xf32>) -> tensor<8x8x8x8xf32>

  %w2 = dtfm.param "block2.w" init(normal, 0.1) {dtfm.layer = "block2"} : tensor<8x8x3x3xf32>
  %c2 = dtfm.conv2d %s1, %w2 {padding = array<i64: 1, 1, 1, 1>, dtfm.layer = "block2"} : (tensor<8x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<8x8x8x8xf32>
  %r2 = dtfm.relu %c2 {dtfm.layer = "block2"} : (tensor<8x8x8x8xf32>) -> tensor<8x8x8x8xf32>
  %s2 = dtfm.add %r2, %s1 {dtfm.layer = "block2"} : (tensor<8x8x8x8xf32>, tensor<8x8x8x8xf32>) -> tensor<8x8x8x8xf32>

  %gp = dtfm.global_avg_pool %s2 {dtfm.layer = "head"} : (tensor<8x8x8x8xf32>) -> tensor<8x8x1x1xf32>
  %f = dtfm.flatten %gp {dtfm.layer = "head"} : (tensor<8x8x1x1xf32>) -> tensor<8x8xf32>
  %fw = dtfm.param "fc.w" init(normal, 0.1) {dtfm.layer = "head"} : tensor<8x10xf32>
  %fb = dtfm.param "fc.b" init(zeros) {dtfm.layer = "head"} : tensor<10xf32>
  %logits = dtfm.linear %f, %fw, %fb {dtfm.layer = "head"} : (tensor<8x8xf32>, tensor<8x10xf32>, tensor<10xf32>) -> tensor<8x10xf32>
  %lab = dtfm.label "labels" {dtfm.layer = "head"} : tensor<8xi64>
  %loss = dtfm.cross_entropy %logits, %lab {dtfm.layer = "head"} : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
