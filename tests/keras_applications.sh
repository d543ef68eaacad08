#!/bin/sh
# keras_applications.sh - the twelve keras.applications models as tf.keras
# 2.15 writes them, through systolic (issue 15, point 3). The files are made
# here by tools/keras_applications.py (they are large: never committed), a
# few models at a time, and removed as soon as they are checked. For each
# of VGG16, VGG19, ResNet50, ResNet101, ResNet152, ResNet50V2, MobileNet,
# MobileNetV2, DenseNet121, InceptionV3, Xception and EfficientNetB0 at its
# default input size and at the smallest Keras allows (weights=None, the
# 1,000-class top):
#
#   - `systolic summary` of its JSON and of its full .h5 prints Keras's
#     total, trainable and non-trainable parameter counts;
#   - test_applications run: the JSON is read and written back byte for
#     byte; the .h5 is loaded and its predictions go to KEY_pred.npy; one
#     training step (SGD(0.001), sparse_categorical_crossentropy, from the
#     .h5's training_config) gives a finite loss equal to Keras's own step
#     on the same weights and batch (1e-3; 10% with dropout masks), and
#     changes the first and last kernels; the model is saved as .h5 and
#     predicted again;
#   - tf.keras: systolic's predictions of Keras's .h5 equal Keras's, and
#     Keras's predictions of systolic's trained .h5 equal systolic's, both
#     to 1e-4 of the largest output.
#
# What is trained: every model at its smallest size (batch 8); at the
# default size (batch 2) the models listed in $train_default (those whose
# step takes a few seconds here); set SYSTOLIC_APPS_TRAIN_ALL=1 to train
# every one. Also: the C constructors sy_applications_vgg16/resnet50 equal
# Keras's to_json for seven argument variants, and a model with a Lambda
# layer is refused naming the layer. SYSTOLIC_APPS_ONLY="vgg16_32 ..."
# limits the run to those configurations.
#
# Which configurations: "all" (the fourth argument; ctest
# keras_applications_all, label long: `make test-long`), the 24; "ci"
# (ctest keras_applications, in `make test` and CI): one model of each
# family that brings layers or structure of its own, at its smallest size
# (VGG16; ResNet50, ResNet50V2, MobileNet, MobileNetV2, DenseNet121,
# InceptionV3, Xception, EfficientNetB0), and ResNet50 at 224, the TPU's
# headline model. VGG19, ResNet101 and ResNet152 repeat their family's
# blocks deeper (130 of the 333 s the thirteen took here), and the other
# default sizes run the same layers on larger maps; a 2-core CI cannot
# give them on every change.
#
# Python is the first of $SYSTOLIC_PYTHON, <root>/.venv/bin/python and
# <root>/.gl/bin/python that imports TensorFlow; skipped (77) without one.
#
#   sh tests/keras_applications.sh build/systolic build/tests/test_applications <repository root> [ci|all]
systolic=$1
test_applications=$2
root=$3
which=${4:-all}
train_default="mobilenet_224 mobilenetv2_224 efficientnetb0_224 densenet121_224 resnet50_224"
. "$root/tests/find_python.sh"
find_python 'import numpy, tensorflow'
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-apps-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
script="$root/tools/keras_applications.py"
fail() { echo "keras_applications: FAILED: $*"; exit 1; }
py() { "$python" "$script" "$@" 2>"$dir/py.err" || { cat "$dir/py.err"; fail "keras_applications.py $*"; }; }

# the C constructors against Keras's JSON
py variants "$dir/variants" >/dev/null
"$test_applications" variants "$dir/variants" || fail "the C constructors differ from Keras"
rm -rf "$dir/variants"

# a Lambda is refused by name
py lambda "$dir" >/dev/null
for f in lambda.json lambda.h5; do
    "$systolic" summary "$dir/$f" >"$dir/out" 2>&1 && fail "systolic summary $f accepted a Lambda layer"
    grep -q "layer 'double_it': Lambda is not supported" "$dir/out" || { cat "$dir/out"; fail "$f: Lambda not named"; }
done

# BatchNormalization's inference bit for bit: systolic's rsqrt is TensorFlow's
py batchnorm "$dir" >/dev/null
"$systolic" predict "$dir/batchnorm.h5" --input "$dir/batchnorm_x.npy" --output "$dir/batchnorm_sy.npy" >"$dir/out" 2>&1 ||
    { cat "$dir/out"; fail "systolic predict batchnorm.h5"; }
py batchnorm-check "$dir"
rm -f "$dir"/batchnorm*

# summary's counts against Keras's: "Total params: N (...)" and the others
counts() {
    "$systolic" summary "$1" >"$dir/out" 2>&1 || { cat "$dir/out"; fail "systolic summary $1"; }
    sed -n 's/^Total params: \([0-9]*\) .*/\1/p; s/^Trainable params: \([0-9]*\) .*/\1/p;
            s/^Non-trainable params: \([0-9]*\) .*/\1/p' "$dir/out" | tr '\n' ' ' | sed 's/ $//'
}

keys=${SYSTOLIC_APPS_ONLY:-$("$python" "$script" list 2>/dev/null)}
[ -n "$keys" ] || fail "keras_applications.py list gave nothing"
case "$which" in
all) ;;
ci)
    [ -n "$SYSTOLIC_APPS_ONLY" ] || keys=$(for k in $keys; do
        case "$k" in vgg19_* | resnet101_* | resnet152_*) ;; *_32 | *_75 | *_71 | resnet50_224) echo "$k" ;; esac
    done)
    ;;
*) fail "unknown set '$which' (ci or all)" ;;
esac
n=0
batch=
run_batch() {
    [ -n "$batch" ] || return 0
    py make "$dir" $batch >/dev/null
    for k in $batch; do
        want=$(cat "$dir/$k.params")
        for f in "$k.json" "$k.h5"; do
            got=$(counts "$dir/$f")
            [ "$got" = "$want" ] || fail "$f: systolic summary counts '$got', Keras '$want' (total trainable non-trainable)"
        done
        train=
        case "$k" in *_32 | *_75 | *_71) train=train ;; esac
        case " $train_default " in *" $k "*) train=train ;; esac
        [ -n "$SYSTOLIC_APPS_TRAIN_ALL" ] && train=train
        start=$(date +%s)
        "$test_applications" run "$dir" "$k" $train >"$dir/out" 2>&1 || { cat "$dir/out"; fail "$k"; }
        grep "one training step" "$dir/out"
        echo "$k: summary counts $want; loaded, predicted, ${train:+trained, }saved in $(($(date +%s) - start)) s"
    done
    py check "$dir" $batch
    for k in $batch; do rm -f "$dir/$k".* "$dir/$k"_*; done
    n=$((n + $(echo $batch | wc -w)))
    batch=
}
for k in $keys; do
    batch="$batch $k"
    [ $(echo $batch | wc -w) -ge 4 ] && run_batch
done
run_batch
echo "keras_applications: $n configurations of keras.applications models agree with tf.keras"
