#!/usr/bin/env python3
"""Writes the committed fuzz seeds under fuzz/seeds/mcpw_*/ (run from anywhere: python3 make_fuzz_seeds.py)."""
import json, struct, gzip, zlib, os, glob
root=os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../..')
fx=root+'/crates/mcpw-codec/tests/fixtures'
codes={"agent.register":10,"registration.confirmed":11,"agent.heartbeat":12,"task.assigned":13,"task.progress":14,"task.complete":15,"agent.capability.update":16,"collaboration.request":17,"state.sync":18,"agent.shutdown":19}
def hdr(kind=0,flags=0,seq=1,method=0,size=0,reserved=0,magic=b'MCPW',version=1):
    return magic+struct.pack('>BBHQHHI',version,kind,flags,seq,method,reserved,size)
def frame(payload,kind=0,flags=0,seq=1,method=0,**kw):
    return hdr(kind,flags,seq,method,len(payload),**kw)+payload
def gz(b): return gzip.compress(b,mtime=0)
def w(target,name,data):
    open(f'{root}/fuzz/seeds/{target}/{name}','wb').write(data)
# header seeds
w('mcpw_header','go_vector', bytes.fromhex('4d435057 01 00 0000 0000000000003039 0002 0000 00000064'.replace(' ','')))
w('mcpw_header','bad_magic', hdr(magic=b'MCPX',size=100))
w('mcpw_header','version_99', hdr(version=99,size=100))
w('mcpw_header','size_2mib', hdr(size=2<<20))
w('mcpw_header','size_exactly_1mib', hdr(size=1<<20))
w('mcpw_header','size_1mib_plus_1', hdr(size=(1<<20)+1))
w('mcpw_header','reserved_nonzero', hdr(reserved=0xbeef))
w('mcpw_header','all_ones_after_magic', b'MCPW\x01'+b'\xff'*19)
w('mcpw_header','unknown_flags_type_method', hdr(kind=200,flags=0xffe0,seq=2**64-1,method=65535,size=5))
w('mcpw_header','short_23', hdr()[:23])
w('mcpw_header','empty', b'')
frames=[]
for p in sorted(glob.glob(fx+'/*.json')):
    name=os.path.basename(p)[:-5]
    m=json.load(open(p))
    if 'error' in m:
        payload=json.dumps(m['error'],separators=(',',':')).encode()
        f=frame(payload,kind=3,seq=9)
    else:
        payload=json.dumps(m['params'],separators=(',',':')).encode()
        f=frame(payload,kind=m['type'],seq=5,method=codes[m['method']])
    frames.append(f)
    w('mcpw_frame','spec_'+name, b'\x00'+f)
    z=gz(payload)
    fz=frame(z,kind=m['type'] if 'params' in m else 3,flags=1,seq=6,method=codes.get(m.get('method'),0))
    w('mcpw_frame','spec_gzip_'+name, b'\x00'+fz)
    w('mcpw_frame','member_'+name, b'\x01'+z)
msgs=[json.load(open(fx+'/agent_heartbeat.json')), json.load(open(fx+'/task_progress.json'))]
batch=json.dumps({"messages":msgs,"count":2},separators=(',',':')).encode()
w('mcpw_frame','batch_go_style_type_only', b'\x00'+frame(batch,kind=6))
w('mcpw_frame','batch_flag_and_type', b'\x00'+frame(batch,kind=6,flags=4))
w('mcpw_frame','batch_count_mismatch', b'\x00'+frame(json.dumps({"messages":msgs,"count":3}).encode(),kind=6))
w('mcpw_frame','batch_nested', b'\x00'+frame(json.dumps({"messages":[{"type":6,"params":{"messages":[]}}]}).encode(),kind=6))
w('mcpw_frame','method0_named', b'\x00'+frame(b'{"method":"custom.thing","params":{"a":1}}'))
w('mcpw_frame','method0_go_unnamed', b'\x00'+frame(b'{"a":1}'))
w('mcpw_frame','tool_execute', b'\x00'+frame(b'{"tool":"x","args":[1,2]}',method=3))
w('mcpw_frame','empty_payload_ping', b'\x00'+frame(b'',kind=4,method=8))
w('mcpw_frame','encrypted', b'\x00'+frame(b'\x00\x01\x02',flags=2))
w('mcpw_frame','bad_params', b'\x00'+frame(b'{"agent_id":7}',method=12))
w('mcpw_frame','truncated_payload', b'\x00'+hdr(size=10)+b'{}')
w('mcpw_frame','trailing_bytes', b'\x00'+frame(b'{}',method=3)+b'xx')
big=b'{"pad":"'+b'a'*5000+b'"}'
zb=gz(big)
w('mcpw_frame','gzip_truncated', b'\x00'+frame(zb[:-5],flags=1,method=3))
bad=bytearray(zb); bad[-8]^=1
w('mcpw_frame','gzip_bad_crc', b'\x00'+frame(bytes(bad),flags=1,method=3))
bad=bytearray(zb); bad[-4]^=1
w('mcpw_frame','gzip_bad_isize', b'\x00'+frame(bytes(bad),flags=1,method=3))
w('mcpw_frame','gzip_trailing_garbage', b'\x00'+frame(zb+b'junk',flags=1,method=3))
w('mcpw_frame','gzip_two_members', b'\x00'+frame(zb+zb,flags=1,method=3))
w('mcpw_frame','gzip_small_bomb_member', b'\x03'+gz(b'\x00'*100000))
w('mcpw_frame','gzip_not_gzip_member', b'\x01'+b'hello world')
w('mcpw_frame','empty', b'')
# what the real Go code writes (INTEROP.md): createBinaryBatch's binary body, the 12-byte form
def binbatch(entries,seq=0):
    body=struct.pack('>I',len(entries))+b''.join(struct.pack('>I',len(e))+e for e in entries)
    return frame(body,kind=6,flags=4,seq=seq)
def compact(payload,kind=0,flags=0,reserved=0):
    return struct.pack('>BBHII',1,flags,kind,len(payload),reserved)+payload
ping_e=b'{"id":"m-1","type":4}'
task_e=b'{"id":"m-2","type":2,"method":"task.assigned","params":{"task_id":"t-1"}}'
w('mcpw_frame','real_binary_batch', b'\x00'+binbatch([ping_e,task_e]))
w('mcpw_frame','real_binary_batch_truncated', b'\x00'+binbatch([ping_e,task_e])[:-5])
w('mcpw_frame','real_binary_batch_count_too_large', b'\x00'+frame(struct.pack('>I',1000),kind=6,flags=4))
w('mcpw_frame','real_binary_batch_nested', b'\x00'+binbatch([b'{"type":6,"params":{"messages":[]}}']))
w('mcpw_frame','real_compact_response', b'\x00'+compact(b'{"id":"r-1","type":1,"result":{"pong":true,"timestamp":1735140600000}}',kind=1))
w('mcpw_frame','real_compact_type_override', b'\x00'+compact(b'{"id":"p-1","type":0,"method":"ping"}',kind=5))
w('mcpw_frame','real_compact_gzip', b'\x00'+compact(gz(json.dumps({"id":"g","type":0,"method":"tool.execute","params":{"t":"x"*3000}}).encode()),flags=1))
w('mcpw_frame','real_compact_type_256', b'\x00'+compact(b'{"id":"a","type":0}',kind=256))
w('mcpw_frame','real_compact_error_without_error', b'\x00'+compact(b'{"id":"a","method":"ping"}',kind=3))
deep=b'{"id":"d","type":0,"method":"tool.execute","params":'+b'['*126+b']'*126+b'}'
w('mcpw_frame','real_binary_batch_deep_entry', b'\x00'+binbatch([deep]))
w('mcpw_frame','code0_named_task_assigned', b'\x00'+frame(b'{"method":"task.assigned","params":{"task_id":"t-9"}}',kind=2))
# stream seeds
w('mcpw_stream','spec_frames_concatenated', b''.join(frames))
w('mcpw_stream','one_frame_then_partial', frames[0]+frames[1][:30])
w('mcpw_stream','payload_error_then_good', frame(b'{"agent_id":7}',method=12)+frames[2])
w('mcpw_stream','good_then_bad_magic', frames[3]+hdr(magic=b'XXXX')+frames[4])
w('mcpw_stream','oversize_header', hdr(size=2<<20)+b'x'*50)
w('mcpw_stream','compressed_frames', b''.join(frame(gz(big),flags=1,method=3,seq=i) for i in range(3)))
w('mcpw_stream','header_only', hdr(size=0,method=9,kind=5))
print(len(os.listdir(root+'/fuzz/seeds/mcpw_header')),len(os.listdir(root+'/fuzz/seeds/mcpw_frame')),len(os.listdir(root+'/fuzz/seeds/mcpw_stream')))
