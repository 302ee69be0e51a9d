// onnxruntime-node (CPU, default options) on one ONNX model, for bench/bench_ort_models.sh.
// Float inputs uniform in [-1, 1), integer inputs (token ids) uniform in [0, 100).
//   node ort_models.js MODEL.onnx N    one warm-up run, then N runs: prints "best median" in ms
//   node ort_models.js MODEL.onnx cold prints "session_ms first_run_ms" of this new process
// Usage: NODE_PATH=DIR/node_modules node ort_models.js ...
const ort = require('onnxruntime-node');

function feeds(session) {
    const out = {};
    for (const name of session.inputNames) {
        const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
        const shape = meta && meta.shape ? meta.shape : null;
        if (!shape || shape.some((d) => typeof d !== 'number'))
            throw new Error(`input ${name}: no static shape`);
        const count = shape.reduce((a, b) => a * b, 1);
        if (meta.type === 'int64') {
            const data = BigInt64Array.from({length: count}, () => BigInt(Math.floor(Math.random() * 100)));
            out[name] = new ort.Tensor('int64', data, shape);
        } else {
            const data = Float32Array.from({length: count}, () => Math.random() * 2 - 1);
            out[name] = new ort.Tensor('float32', data, shape);
        }
    }
    return out;
}

async function main() {
    const [model, mode] = [process.argv[2], process.argv[3] || '5'];
    const t0 = process.hrtime.bigint();
    const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
    const t1 = process.hrtime.bigint();
    const input = feeds(session);
    const t2 = process.hrtime.bigint();
    await session.run(input);
    const t3 = process.hrtime.bigint();
    if (mode === 'cold') {
        console.log(`${(Number(t1 - t0) / 1e6).toFixed(1)} ${(Number(t3 - t2) / 1e6).toFixed(1)}`);
        return;
    }
    const runs = parseInt(mode, 10);
    const times = [];
    for (let i = 0; i < runs; i++) {
        const start = process.hrtime.bigint();
        await session.run(input);
        times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`${times[0].toFixed(3)} ${times[Math.floor(times.length / 2)].toFixed(3)}`);
}

main().catch((e) => { console.error(e.message); process.exit(1); });
