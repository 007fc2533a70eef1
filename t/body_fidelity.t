#!/usr/bin/perl

# Body fidelity: what a provider receives is byte for byte the client's
# body except the model value, on every attempt of a fallback, for bodies
# nginx keeps in memory and bodies it spooled to a temp file; valid JSON
# that a tree parser would refuse or rewrite (0.7, 1.5e3, \u00e9, \/, a
# 20-digit integer, 1e400, \u0000) is forwarded as it is.  A real agent
# body of ~150 KB (../shared/fixtures/agent_body.py) goes the same way.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

$t->write_file('key-bad', "sk-bad~status=503\n");
$t->write_file('key-ok', "sk-ok\n");

# each fallback case has a failing provider of its own (a failure cools
# the connection and counts for its breaker)
my $combos = join '', map { <<"EOF" } 1 .. 8;
    omniroute_provider bad$_ url=http://127.0.0.1:%%PORT_mock_p%%/bad
                       auth=bearer;
    omniroute_connection b$_ provider=bad$_ key_file=%%TESTDIR%%/key-bad;
    omniroute_combo smart$_ bad$_/upstream-first good/upstream-second;
EOF

$t->config($combos . <<'EOF');
    omniroute_zone zone=omniroute:1m;
    client_max_body_size 4m;

    omniroute_provider good url=http://127.0.0.1:%%PORT_mock_p%%/good
                       auth=bearer;
    omniroute_connection g1 provider=good key_file=%%TESTDIR%%/key-ok;

    omniroute_model same good/same;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            client_body_buffer_size 4m;     # bodies stay in memory
            omniroute_pass;
        }

        location /file/v1/ {
            client_body_buffer_size 1k;     # bodies go to a temp file
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF

$t->run($t->port('gw'));

my $gw = $t->port('gw');

# values a JSON tree would re-encode or refuse, around the model
my $tricky = '{"temperature":0.7,"n":1.5e3,"top_p":1E-7,'
    . '"s":"caf\u00e9 \/ \"q\" \u00e9t\u00e9 ' . "r\xc3\xa9el" . '",'
    . '"seed":12345678901234567890,"huge":1e400,"nul":"a\u0000b",'
    . '"model":"MODEL","nested":{"model":"not-this-one"},'
    . '"messages":[{"role":"user","content":"hi"}] ,  "stream" : false }';

# byte equality, with a short diagnosis (bodies are large)
sub same_bytes {
    my ($got, $want, $name) = @_;
    $got //= '';
    return pass($name) if $got eq $want;
    my $i = 0;
    $i++ while $i < length($got) && $i < length($want)
               && substr($got, $i, 1) eq substr($want, $i, 1);
    fail($name);
    diag(sprintf "lengths %d vs %d; first difference at byte %d:\n"
         . "  got:  %s\n  want: %s", length $got, length $want, $i,
         substr($got, $i > 20 ? $i - 20 : 0, 60),
         substr($want, $i > 20 ? $i - 20 : 0, 60));
}

sub body_with {
    my ($tmpl, $model) = @_;
    (my $b = $tmpl) =~ s/"model":"MODEL"/"model":"$model"/;
    return $b;
}

my $case = 0;

sub check_fallback {
    my ($path, $body, $client_model, $name) = @_;

    $case++;
    $client_model .= $case;

    $m->clear;
    my $r = $t->post($gw, $path, body_with($body, $client_model),
                     'Content-Type' => 'application/json');
    is($r->{status}, 200, "$name: 200 after a fallback");

    my @req = @{$m->requests};
    is(scalar @req, 2, "$name: two attempts");

    same_bytes($req[0]{body}, body_with($body, 'upstream-first'),
               "$name: first attempt: the client's bytes, model replaced");
    same_bytes($req[1]{body}, body_with($body, 'upstream-second'),
               "$name: fallback attempt: the client's bytes, model "
               . "replaced");
    is($req[1]{headers}{'content-length'},
       length(body_with($body, 'upstream-second')),
       "$name: Content-Length of the spliced body");
}

check_fallback('/v1/chat/completions', $tricky, 'smart',
               'memory body');
check_fallback('/file/v1/chat/completions', $tricky, 'smart',
               'temp-file body');

# the model named with escapes is found; only its value is replaced
check_fallback('/v1/chat/completions', $tricky, 'sm\u0061rt',
               'escaped model name');

# unchanged model: the body is forwarded untouched
for my $path ('/v1/chat/completions', '/file/v1/chat/completions') {
    $m->clear;
    my $b = body_with($tricky, 'same');
    my $r = $t->post($gw, $path, $b);
    is($r->{status}, 200, "$path: same model answered");
    same_bytes($m->requests->[0]{body}, $b,
               "$path: same model: body untouched");
}

# an upstream model that needs JSON escaping is quoted in the splice
$m->clear;
my $r = $t->post($gw, '/v1/chat/completions',
                 body_with($tricky, 'good/we\"ird\\\\name'));
is($r->{status}, 200, 'provider/model with escapes answered');
same_bytes($m->requests->[0]{body}, body_with($tricky, 'we\"ird\\\\name'),
           'upstream model with a quote and a backslash: escaped');

# a real agent body (~150 KB: system prompt, tool schemas, the whole
# conversation, non-ASCII text), spliced in memory and from a temp file

SKIP: {
    my $gen = "$OmniTest::ROOT/../shared/fixtures/agent_body.py";
    OmniTest::skip_without('fixtures not found', 10) unless -f $gen;

    my $agent = `python3 $gen 150 MODEL`;
    OmniTest::skip_without('python3 could not run the generator', 10)
        unless $? == 0;

    $agent =~ s/"model": "MODEL"/"model":"MODEL"/;
    ok(length $agent > 150 * 1024, 'agent body of more than 150 KB');

    check_fallback('/v1/chat/completions', $agent, 'smart',
                   'agent body in memory');
    check_fallback('/file/v1/chat/completions', $agent, 'smart',
                   'agent body from a temp file');
}

$t->done;
done_testing;
