// Milliseconds per run of an ONNX model in onnxruntime (CPU), for bench/bench_models_ort.sh:
// inputs uniform in [-1, 1), one warm-up run, then N runs; prints "best median" in ms.
// Usage: NODE_PATH=DIR/node_modules node ort_time.js MODEL.onnx N
const ort = require('onnxruntime-node');

async function main() {
    const [model, runs] = [process.argv[2], parseInt(process.argv[3] || '5', 10)];
    const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
    const feeds = {};
    for (const name of session.inputNames) {
        const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
        const shape = meta && meta.shape ? meta.shape : null;
        if (!shape)
            throw new Error(`input ${name}: no static shape`);
        const count = shape.reduce((a, b) => a * b, 1);
        const data = Float32Array.from({length: count}, () => Math.random() * 2 - 1);
        feeds[name] = new ort.Tensor('float32', data, shape);
    }
    await session.run(feeds);
    const times = [];
    for (let i = 0; i < runs; i++) {
        const start = process.hrtime.bigint();
        await session.run(feeds);
        times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`${times[0].toFixed(3)} ${times[Math.floor(times.length / 2)].toFixed(3)}`);
}

main().catch((e) => { console.error(e.message); process.exit(1); });
