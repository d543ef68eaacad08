# tflite_models_dir.sh - sourced by the interop tests on TensorFlow's int8
# models: tflite_models_dir DIR [MODELS] fills DIR (the test's own, which
# it writes in) with tools/tflite_models.py's files -- copied from MODELS,
# the directory the fixture tflite_models made (tests/tflite_models.sh),
# when given, else made here by TensorFlow (a script run by hand). $python
# (tests/find_python.sh) and $root must be set. Exits 1 when the models are
# missing or TensorFlow fails.
tflite_models_dir() {
    if [ -n "$2" ]; then
        [ -f "$2/tflite.json" ] || {
            echo "no $2/tflite.json: the fixture tflite_models (tests/tflite_models.sh) did not make the models"
            exit 1
        }
        cp "$2"/* "$1"/ || exit 1
        return 0
    fi
    "$python" "$root/tools/tflite_models.py" "$1" >"$1/python.log" 2>&1 || {
        cat "$1/python.log"
        echo "tools/tflite_models.py failed"
        exit 1
    }
}
